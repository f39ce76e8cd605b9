"""runner.available_cores on fake cgroup files: the quota (v2 cpu.max, v1 cfs_quota_us over
cfs_period_us) rounded down, never more than the affinity, at least 1."""
import os

import pytest

from tfcourse.batch.runner import available_cores

V1 = ("cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us")


@pytest.mark.parametrize("files, affinity, cores", [
    ({}, 8, 8),                                                 # no cgroup: the affinity
    ({"cpu.max": "max 100000\n"}, 8, 8),                        # v2, no quota
    ({"cpu.max": "200000 100000\n"}, 8, 2),
    ({"cpu.max": "150000 100000\n"}, 8, 1),                     # 1.5 cores: 1 (loky says 2)
    ({"cpu.max": "50000 100000\n"}, 8, 1),                      # half a core: still 1
    ({"cpu.max": "400000 100000\n"}, 2, 2),                     # the affinity is smaller
    ({"cpu.max": "max\n"}, 8, 8),                               # one field: read as none
    ({V1[0]: "-1\n", V1[1]: "100000\n"}, 8, 8),                 # v1, no quota
    ({V1[0]: "300000\n", V1[1]: "100000\n"}, 8, 3),
    ({V1[0]: "250000\n", V1[1]: "100000\n"}, 8, 2),             # 2.5 cores: 2 (loky says 3)
    ({V1[0]: "300000\n"}, 8, 8),                                # no period: none
    ({"cpu.max": "300000 100000\n", V1[0]: "100000\n", V1[1]: "100000\n"}, 8, 3),  # v2 first
])
def test_cores_from_the_cgroup_quota_and_the_affinity(tmp_path, monkeypatch, files, affinity,
                                                       cores):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)))
    assert available_cores(tmp_path) == cores
