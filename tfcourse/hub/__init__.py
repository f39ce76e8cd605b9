"""Feedback on submit, on a JupyterHub: the `tfcourse-feedback` service.

nbgrader's students submit into the exchange's inbound folder; the instructor collects and grades
the class later. This service, started by the hub as the instructor's user, watches that folder and
grades each new submission at once, in the sandbox, with the same engine as `tfcourse grade`; each
student reads their own results on the service's page (hub login), within the fair use that
course.yaml's `feedback` section sets. The instructor's batch grading stays the grade of record.

    inbox.py     the exchange's inbound folder: who submitted what, checked, and copied once
    ledger.py    what happened to each submission, on disk (restart-safe), and fair use
    page.py      what a student sees: their results, with each check shown as course.yaml says
    service.py   the watcher, the grading workers, the web page; `tfcourse feedback-service`
"""
