"""Which callback phases `make bench` runs for BENCH_ONLY (bench/callbacks.py)."""

from bench.callbacks import CALLBACK_PHASES, callback_phases


def test_no_choice_or_callbacks_runs_every_phase() -> None:
    assert callback_phases([]) == set(CALLBACK_PHASES)
    assert callback_phases(["ceiling", "callbacks"]) == set(CALLBACK_PHASES)


def test_each_phase_named_runs_and_no_other() -> None:
    assert callback_phases(["backlog", "payment-rate"]) == {"backlog", "payment-rate"}
    assert callback_phases(["payment-rate"]) == {"payment-rate"}
    assert callback_phases(["ceiling", "backlog"]) == {"backlog"}


def test_endpoint_scenarios_alone_run_no_callback_phase() -> None:
    assert callback_phases(["ceiling", "card-charge"]) == set()
