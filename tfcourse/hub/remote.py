"""The feedback service grading on a Dask cluster: `tfcourse feedback-service --scheduler ADDRESS`.

Each submission the service takes is graded as `tfcourse grade --scheduler` grades one
(tfcourse/batch/cluster.py): its snapshot travels as bytes, a worker grades it in its sandbox
and answers with JSON, checked here before it becomes a report. Fair use, records and pages stay
the service's: only where the grading runs changes. A worker that dies mid-task loses nothing: the
scheduler sends its task to another worker, and the service, waiting on that one task, records
one result. A worker that refuses (no bubblewrap, another course) is sent no more.
"""
from __future__ import annotations

import logging
import threading
import uuid
from pathlib import Path

from tfcourse.course import Course
from tfcourse.batch import cluster
from tfcourse.submission.report import SubmissionReport
from tfcourse.batch.child import grader_version, runtime_versions, student_threads
from tfcourse.submission.failures import failure_report

log = logging.getLogger("tfcourse.feedback")


class Remote:
    """A Dask client of the scheduler at `address`, grading one submission per call of `grade`
    (from the service's worker threads, several at once). Raises cluster.ClusterError when the
    scheduler cannot be reached."""

    def __init__(self, course: Course, address: str):
        self.course = course
        self.client = cluster.connect(address)
        self.version, self.runtime = grader_version(course), runtime_versions()
        self.refusing: set[str] = set()         # workers that refused: sent no more
        self.said: set[str] = set()             # what workers said, logged once each
        self.lock = threading.Lock()

    def slots(self) -> int:
        """Submissions the cluster grades at once now: its workers' threads."""
        return max(1, sum(self.client.nthreads().values()))

    def close(self) -> None:
        self.client.close()

    def _say(self, line: str) -> None:
        with self.lock:
            if line in self.said:
                return
            self.said.add(line)
        log.warning("%s", line)

    def _others(self) -> list[str] | None:
        """The workers a task may go to: any while none refused, else those that did not (an
        empty list: none left)."""
        with self.lock:
            if not self.refusing:
                return None
            refusing = set(self.refusing)
        return [w for w in self.client.scheduler_info()["workers"] if w not in refusing]

    def grade(self, course: Course, folder: Path, assignment: str, within: Path | None = None,
              skip: list[str] = ()) -> SubmissionReport:
        """Grade the snapshot `folder` on a worker; a failure's report, saying why, when no
        worker grades it (each refused, or it ended every worker it was sent to)."""
        from distributed import KilledWorker

        payload = {"submission": cluster.pack(course, folder, within, assignment),
                   "version": self.version, "runtime": self.runtime,
                   "threads": student_threads(course), "assignment": assignment, "skip": list(skip)}
        while (workers := self._others()) is None or workers:
            where = {} if workers is None else {"workers": workers, "allow_other_workers": False}
            future = self.client.submit(cluster.TASK, payload, pure=False, retries=1,
                                        key=f"tfcourse-feedback-{uuid.uuid4().hex}", **where)
            try:
                report, _, lines = cluster.read_answer(future.result())
            except cluster.WorkerRefused as refused:
                self._say(str(refused))
                if not refused.address:
                    return failure_report(course, folder, assignment, f"not graded: {refused}",
                                          within, skip)
                with self.lock:
                    self.refusing.add(refused.address)
                continue
            except KilledWorker as error:
                return failure_report(course, folder, assignment, (
                    f"grading this submission ended each of the {error.allowed_failures + 1} "
                    f"Dask workers it was sent to, so it was not graded"), within, skip)
            finally:
                future.release()
            for line in lines:
                self._say(line)
            return report
        return failure_report(course, folder, assignment, "not graded: every Dask worker "
                              "refused to grade for this service (see its log)", within, skip)
