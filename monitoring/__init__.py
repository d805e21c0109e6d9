"""What an operator's monitoring reads from a web node: /metrics (the counters observability keeps,
with gauges read from the journal's and the compensations' rows at scrape time) and /healthz (the
database and the broker reachable). It sits above the apps whose rows it reads; the
instrumentation those apps call while they work (log context, counters) is observability's,
below them all."""
