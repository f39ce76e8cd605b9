"""The feedback service's page, behind the hub's login: each user sees their own submissions
(page.py), an instructor everyone's, the queue (api/queue) and the class report (report/).

Imported only where the page is served: it needs JupyterHub's package (`tfcourse[hub]`)."""
from __future__ import annotations

import os

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from tornado import web

from . import keys, page


class Base(HubOAuthenticated, web.RequestHandler):
    """A request of a logged-in hub user, answered from the service (service.Service)."""

    def initialize(self, service, instructors: set[str]):
        self.service, self.instructors = service, instructors

    def is_instructor(self) -> bool:
        return self.get_current_user()["name"] in self.instructors

    def student(self) -> str:
        """Whose page: the user's own; an instructor may ask for a student's (?student=NAME)."""
        if self.is_instructor() and self.get_argument("student", None):
            return self.get_argument("student")
        return self.get_current_user()["name"]


class Page(Base):
    @web.authenticated
    def get(self):
        service = self.service
        self.set_header("Cache-Control", "no-store")
        if self.is_instructor() and not self.get_argument("student", None):
            self.write(page.instructor(service.course, service.overview(), service.lang))
            return
        student = self.student()
        records, results = service.view(student)
        own = student == self.get_current_user()["name"]
        self.write(page.page(service.course, student, records, results, service.clock(),
                             service.lang, service.waits(), service.not_recorded(student),
                             key=service.key(student) if own else None))


class Key(Base):
    """The logged-in user's own submission key (--trust-names, keys.py), for their server to
    write into an assignment folder: {"student", "key", "file"}; 404 where none is needed."""

    @web.authenticated
    def get(self):
        student = self.get_current_user()["name"]
        key = self.service.key(student)
        if key is None:
            raise web.HTTPError(404)
        self.set_header("Cache-Control", "no-store")
        self.write({"student": student, "key": key, "file": keys.KEY_FILE})


class Api(Base):
    @web.authenticated
    def get(self):
        service, student = self.service, self.student()
        records, results = service.view(student)
        now, waits = service.clock(), service.waits()
        self.set_header("Cache-Control", "no-store")
        self.write({"student": student, "submissions": [
            page.summary(r, results.get(r.key), service.course, now, service.lang,
                         waits.get(r.key)) for r in records]})


class Queue(Base):
    @web.authenticated
    def get(self):
        if not self.is_instructor():
            raise web.HTTPError(403)
        self.set_header("Cache-Control", "no-store")
        self.write(self.service.overview())


class Report(Base):
    """The class report, for instructors: its pages, figures and CSV files."""
    TYPES = {".html": "text/html; charset=utf-8", ".png": "image/png",
             ".csv": "text/csv; charset=utf-8"}

    @web.authenticated
    def get(self, path):
        if not self.is_instructor():
            raise web.HTTPError(403)
        folder = self.service.class_report().resolve()
        target = (folder / (path or "index.html")).resolve()
        if folder not in target.parents or not target.is_file() or \
                target.suffix not in self.TYPES:
            raise web.HTTPError(404)
        self.set_header("Content-Type", self.TYPES[target.suffix])
        self.set_header("Cache-Control", "no-store")
        self.write(target.read_bytes())


def make_app(service, prefix: str, instructors: set[str]) -> web.Application:
    """A tornado application serving the page under `prefix` (the hub's JUPYTERHUB_SERVICE_PREFIX),
    each user seeing their own submissions; `instructors` see everyone's."""
    given = {"service": service, "instructors": set(instructors)}
    return web.Application([
        (prefix, Page, given),
        (prefix + r"report/(.*)", Report, given),
        (prefix + "api/feedback", Api, given),
        (prefix + "api/key", Key, given),
        (prefix + "api/queue", Queue, given),
        (prefix + "oauth_callback", HubOAuthCallbackHandler),
    ], cookie_secret=os.urandom(32))
