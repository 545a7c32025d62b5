"""The suite's own machinery: a module marked ``xdist_group`` runs on one worker.

Its expensive fixtures (a whole class graded, a leaderboard served) are session-scoped "once
per worker"; if the grouping silently stops working (pytest 9 with xdist 3.8 did), each runs
once on every worker, at the same time, and the suite takes twice as long."""

import pytest

pytestmark = pytest.mark.xdist_group("suite-setup")


@pytest.mark.parametrize("i", range(2))
def test_a_marked_module_is_kept_on_one_worker(request, i):
    config = request.config
    if not hasattr(config, "workerinput"):
        pytest.skip("not run under pytest-xdist")
    if not getattr(config.option, "loadgroup", False):
        pytest.skip("xdist runs with another --dist")
    assert request.node.nodeid.endswith("@suite-setup"), (
        "xdist did not group this module's tests (its node id has no @group suffix): "
        "pin a pytest/pytest-xdist pair that keeps xdist_group"
    )


def test_a_dead_worker_ends_the_run_instead_of_hanging_it(request):
    """With loadgroup, xdist 3.8 replaces a dead worker with one that waits forever for
    tests it is never given: the suite hangs until CI's limit. It must stop instead."""
    config = request.config
    if not hasattr(config, "workerinput"):
        pytest.skip("not run under pytest-xdist")
    assert str(config.getoption("maxworkerrestart")) == "0"
    assert config.getoption("timeout_method") in (None, "signal")  # a timeout kills no worker
