"""httpx transports that stand between the client and the live server and break the connection
the way networks do: after the server has committed and answered (the answer is lost), or
before the request reaches it (a 502/503 from a proxy that never forwarded it). Each breaks only
the requests its `when` picks, and only `times` of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

Pick = Callable[[httpx.Request], bool]


def posts_to(suffix: str) -> Pick:
    """POSTs whose path ends with `suffix` (`/intents/`, `/outcome/`, `/customer-messages/`)."""
    return lambda request: request.method == "POST" and request.url.path.endswith(suffix)


@dataclass
class Breaks:
    when: Pick
    times: int = 1
    # "lost": forward, let the server commit and answer, then drop the answer (ReadError).
    # "refused": answer `status` without forwarding. "after": forward, then answer `status`.
    how: str = "lost"
    status: int = 503
    broken: list[str] = field(default_factory=list)
    forwarded: list[str] = field(default_factory=list)

    def breaks(self, request: httpx.Request) -> bool:
        if len(self.broken) < self.times and self.when(request):
            self.broken.append(f"{request.method} {request.url.path}")
            return True
        return False


class BreakingTransport(httpx.BaseTransport):
    def __init__(self, plan: Breaks) -> None:
        self.plan = plan
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        broken = self.plan.breaks(request)
        if broken and self.plan.how == "refused":
            return httpx.Response(self.plan.status, request=request)
        response = self.inner.handle_request(request)
        self.plan.forwarded.append(f"{request.method} {request.url.path}")
        if not broken:
            return response
        response.read()
        response.close()
        if self.plan.how == "after":
            return httpx.Response(self.plan.status, request=request)
        raise httpx.ReadError("connection reset after the server answered", request=request)

    def close(self) -> None:
        self.inner.close()


class AsyncBreakingTransport(httpx.AsyncBaseTransport):
    def __init__(self, plan: Breaks) -> None:
        self.plan = plan
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        broken = self.plan.breaks(request)
        if broken and self.plan.how == "refused":
            return httpx.Response(self.plan.status, request=request)
        response = await self.inner.handle_async_request(request)
        self.plan.forwarded.append(f"{request.method} {request.url.path}")
        if not broken:
            return response
        await response.aread()
        await response.aclose()
        if self.plan.how == "after":
            return httpx.Response(self.plan.status, request=request)
        raise httpx.ReadError("connection reset after the server answered", request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()
