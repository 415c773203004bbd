"""What the tests and the benchmarks share, and the daemon does not ship.

    launcher   one way to start, stop, kill and restart ``memoryd serve`` on a free
               loopback port (tests/integration, tests/e2e, tests/fuzz, tests/conformance
               and bench/ all use it)
    memories   the shared sample memories (``FACTS``) and what a memory *is* for
               comparisons (``memory_content``)
    records    stored memory records and LanceStore rows made in one line (``record``,
               ``row``), for the tests that drive storage itself
    otlp       an OTLP/gRPC trace collector on loopback (the tests of tracing.exporter
               = "otlp")
    node       the venv's Node on PATH and the repo's scripts/*_setup.sh, for the tests
               that drive Node tools (buf curl, the MCP Inspector, the OpenClaw plugin)

Not installed: pytest finds it through ``pythonpath`` in pyproject.toml, bench/harness.py
puts this folder on ``sys.path``.
"""
