"""Worked examples of integrating a provider with Seam from outside the built-in apps."""
