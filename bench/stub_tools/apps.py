from django.apps import AppConfig


class StubToolsConfig(AppConfig):
    """The benchmarks' instant tool: installed only by the benchmarks' own processes."""

    name = "bench.stub_tools"
    label = "bench_stub_tools"
    verbose_name = "Benchmark stub tools"
