"""A stateful GitHub REST double on 127.0.0.1 (aiohttp, in a background thread) for PyGithub.

It keeps a small git object store per repository (blobs, flat trees, commits, refs), so commits made
through the git data API, the contents API, pull-request files and branch heads agree with each other.
Served (shapes as GitHub's, only fields PyGithub and ASAP read):

* ``GET /repos/{o}/{r}``; ``GET /repos/{o}/{r}/contents/{path}?ref=``
* ``GET /repos/{o}/{r}/git/ref/heads/{b}``, ``POST .../git/refs``, ``PATCH .../git/refs/heads/{b}`` (force),
  ``GET/POST .../git/commits``, ``POST .../git/blobs``, ``POST .../git/trees``
* ``GET/POST .../pulls``, ``GET/PATCH .../pulls/{n}``, ``GET .../pulls/{n}/files``
* ``GET .../issues/{n}``, ``GET/POST .../issues/{n}/comments``, ``PATCH .../issues/comments/{id}``
* ``POST .../statuses/{sha}``, ``GET .../collaborators/{user}/permission``
* ``POST .../check-runs``, ``GET/PATCH .../check-runs/{id}``: only an App installation token may write
  (anything else gets GitHub's ``403 "You must authenticate via a GitHub App."``); at most 50 annotations
  per request and 65535 characters per output text (422 otherwise); a PATCH appends annotations. Answers
  are GitHub's published example (``tests/data/github/rest/check-run.json``) with the request's values.
* ``GET /orgs/{o}/teams/{slug}``, ``GET /orgs/{o}/teams/{slug}/memberships/{user}``, ``GET /user``
* GitHub App: ``GET /app`` and ``POST /app/installations/{id}/access_tokens`` (RS256 JWT verified against
  the App's public key), ``GET /repos/{o}/{r}/installation``.

Requests authenticate with ``Authorization: token <t>`` (tokens map to logins); each request is logged in
:attr:`GitHubRestDouble.requests` as ``(method, path, login)``. :attr:`GitHubRestDouble.before` holds
callables ``(method, path, body)`` run before a request is served (outside the state lock), to let a test
act at an exact moment (another apply creating the same branch). Webhook payloads for the tests come from
octokit/webhooks' published examples (``tests/data/github/webhooks``, see the README there) via
:func:`example_comment_event` / :func:`example_pull_event`. :class:`tests.doubles.github_double.GitHubDouble`
(closed-PR history) stays a separate server; this one composes its ``_sha`` helper for object ids.
"""

from __future__ import annotations

import asyncio
import base64
import difflib
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.doubles.github_double import _sha


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RepoState:
    name: str
    default_branch: str = "main"
    blobs: dict[str, bytes] = field(default_factory=dict)
    trees: dict[str, dict[str, str]] = field(default_factory=dict)  # tree sha -> {path: blob sha}
    commits: dict[str, dict[str, Any]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)  # "heads/main" -> sha
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> {issue, body, user, ...}
    statuses: list[dict[str, Any]] = field(default_factory=list)
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> check run as served
    collaborators: dict[str, str] = field(default_factory=dict)  # login -> permission
    next_number: int = 1


class GitHubRestDouble:
    """``with GitHubRestDouble() as gh: gh.add_repo("acme/llm", {...}); Github(base_url=gh.base_url, ...)``."""

    def __init__(self, *, tokens: dict[str, str] | None = None, fail: dict[str, int] | None = None) -> None:
        self.tokens: dict[str, str] = dict(tokens or {"bot-token": "asap-bot"})
        self.repos: dict[str, RepoState] = {}
        self.teams: dict[tuple[str, str], set[str]] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.fail = dict(fail or {})  # "METHOD path-prefix" -> status to answer once
        self.app: dict[str, Any] | None = None  # {"id", "slug", "public_key", "installations": {id: repo}}
        self.issued_tokens: list[tuple[str, float]] = []
        self.token_ttl_s = 3600.0  # lower it to make PyGithub refresh installation tokens
        self.before: list[Any] = []  # callables (method, path, body) run before serving a request
        self._next_id = 1000
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    # ---------------------------------------------------------------- lifecycle
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def __enter__(self) -> GitHubRestDouble:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)  # type: ignore[union-attr]
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    # ---------------------------------------------------------------- seeding (test side)
    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def add_repo(self, name: str, files: dict[str, str], *, collaborators: dict[str, str] | None = None,
                 default_branch: str = "main") -> RepoState:
        repo = RepoState(name=name, default_branch=default_branch, collaborators=dict(collaborators or {}))
        self.repos[name] = repo
        self.commit(name, default_branch, files, message="initial", email="dev@example.com", replace=True)
        return repo

    def add_team(self, org: str, slug: str, members: list[str]) -> None:
        self.teams[(org, slug)] = set(members)

    def enable_app(self, app_id: int, public_key_pem: str, installations: dict[int, str], slug: str = "asap") -> None:
        self.app = {"id": app_id, "slug": slug, "public_key": public_key_pem, "installations": installations}

    def _write_tree(self, repo: RepoState, files: dict[str, str]) -> str:
        entries: dict[str, str] = {}
        for path, text in files.items():
            data = text.encode("utf-8")
            sha = _sha("blob", data.hex())
            repo.blobs[sha] = data
            entries[path] = sha
        tree_sha = _sha("tree", sorted(entries.items()))
        repo.trees[tree_sha] = entries
        return tree_sha

    def _make_commit(self, repo: RepoState, tree: str, parents: list[str], message: str,
                     author: dict[str, str], committer: dict[str, str]) -> str:
        sha = _sha("commit", tree, parents, message, author.get("email"), committer.get("email"), time.time_ns())
        repo.commits[sha] = {"tree": tree, "parents": parents, "message": message,
                             "author": {**author, "date": _now()}, "committer": {**committer, "date": _now()}}
        return sha

    def commit(self, name: str, branch: str, files: dict[str, str], *, message: str = "change",
               email: str = "dev@example.com", replace: bool = False, parent_branch: str | None = None) -> str:
        """A person's push: a commit on ``branch`` (created from ``parent_branch`` or itself) with ``files``."""
        with self._lock:
            repo = self.repos[name]
            parent = repo.refs.get(f"heads/{parent_branch or branch}")
            base = {} if replace or parent is None else dict(repo.trees[repo.commits[parent]["tree"]])
            merged = {p: repo.blobs[s].decode() for p, s in base.items()}
            merged.update(files)
            tree = self._write_tree(repo, merged)
            who = {"name": email.split("@")[0], "email": email}
            sha = self._make_commit(repo, tree, [parent] if parent else [], message, who, who)
            repo.refs[f"heads/{branch}"] = sha
            for pr in repo.pulls.values():
                if pr["head"] == branch and pr["state"] == "open":
                    pr["head_sha"] = sha
            return sha

    def open_pull(self, name: str, head: str, *, title: str = "change", body: str = "", user: str = "dev",
                  base: str | None = None) -> int:
        with self._lock:
            repo = self.repos[name]
            return self._new_pull(repo, head, base or repo.default_branch, title, body, user)

    def _new_pull(self, repo: RepoState, head: str, base: str, title: str, body: str, user: str) -> int:
        n = repo.next_number
        repo.next_number += 1
        repo.pulls[n] = {"number": n, "head": head, "base": base, "title": title, "body": body, "user": user,
                         "state": "open", "head_sha": repo.refs[f"heads/{head}"],
                         "base_sha_at_open": repo.refs[f"heads/{base}"], "id": self._id()}
        return n

    def file_at(self, name: str, ref: str, path: str) -> str | None:
        repo = self.repos[name]
        sha = repo.refs.get(f"heads/{ref}", ref)
        commit = repo.commits.get(sha)
        if commit is None:
            return None
        blob = repo.trees[commit["tree"]].get(path)
        return None if blob is None else repo.blobs[blob].decode()

    def add_comment(self, name: str, number: int, body: str, user: str) -> int:
        """A comment someone (a person, or the bot) wrote on issue/PR ``number``; returns its id."""
        with self._lock:
            cid = self._id()
            self.repos[name].comments[cid] = {"issue": number, "body": body, "user": user,
                                              "created_at": _now(), "updated_at": _now(), "edits": 0}
            return cid

    def comments_on(self, name: str, number: int) -> list[dict[str, Any]]:
        return [c for c in self.repos[name].comments.values() if c["issue"] == number]

    # ---------------------------------------------------------------- JSON shapes
    def _user(self, login: str) -> dict[str, Any]:
        kind = "Bot" if login.endswith("[bot]") else "User"
        return {"login": login, "id": int(_sha(login)[:6], 16), "type": kind, "url": f"{self.base_url}/users/{login}"}

    def _repo_json(self, repo: RepoState) -> dict[str, Any]:
        owner, short = repo.name.split("/")
        return {"id": int(_sha(repo.name)[:6], 16), "name": short, "full_name": repo.name, "owner": self._user(owner),
                "url": f"{self.base_url}/repos/{repo.name}", "html_url": f"https://github.example/{repo.name}",
                "default_branch": repo.default_branch, "private": False}

    def _commit_json(self, repo: RepoState, sha: str) -> dict[str, Any]:
        c = repo.commits[sha]
        url = f"{self.base_url}/repos/{repo.name}/git/commits"
        return {"sha": sha, "url": f"{url}/{sha}", "message": c["message"], "author": c["author"],
                "committer": c["committer"], "tree": {"sha": c["tree"], "url": f"{self.base_url}/repos/{repo.name}/git/trees/{c['tree']}"},
                "parents": [{"sha": p, "url": f"{url}/{p}"} for p in c["parents"]]}

    def _ref_json(self, repo: RepoState, ref: str) -> dict[str, Any]:
        sha = repo.refs[ref]
        return {"ref": f"refs/{ref}", "url": f"{self.base_url}/repos/{repo.name}/git/refs/{ref}",
                "object": {"sha": sha, "type": "commit", "url": f"{self.base_url}/repos/{repo.name}/git/commits/{sha}"}}

    def _pull_json(self, repo: RepoState, pr: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}/repos/{repo.name}/pulls/{pr['number']}"
        return {"id": pr["id"], "number": pr["number"], "state": pr["state"], "title": pr["title"], "body": pr["body"],
                "url": url, "html_url": f"https://github.example/{repo.name}/pull/{pr['number']}",
                "issue_url": f"{self.base_url}/repos/{repo.name}/issues/{pr['number']}",
                "user": self._user(pr["user"]), "merged_at": None, "created_at": _now(), "updated_at": _now(),
                "head": {"ref": pr["head"], "sha": pr["head_sha"], "repo": self._repo_json(repo)},
                "base": {"ref": pr["base"], "sha": repo.refs[f"heads/{pr['base']}"], "repo": self._repo_json(repo)}}

    def _comment_json(self, repo: RepoState, cid: int) -> dict[str, Any]:
        c = repo.comments[cid]
        return {"id": cid, "body": c["body"], "user": self._user(c["user"]),
                "url": f"{self.base_url}/repos/{repo.name}/issues/comments/{cid}",
                "html_url": f"https://github.example/{repo.name}/pull/{c['issue']}#issuecomment-{cid}",
                "issue_url": f"{self.base_url}/repos/{repo.name}/issues/{c['issue']}",
                "created_at": c["created_at"], "updated_at": c["updated_at"]}

    def _pull_files(self, repo: RepoState, pr: dict[str, Any]) -> list[dict[str, Any]]:
        base_commit = repo.commits[repo.refs[f"heads/{pr['base']}"]]
        head_commit = repo.commits[pr["head_sha"]]
        before, after = repo.trees[base_commit["tree"]], repo.trees[head_commit["tree"]]
        out = []
        for path in sorted(set(before) | set(after)):
            if before.get(path) == after.get(path):
                continue
            status = "added" if path not in before else "removed" if path not in after else "modified"
            old = repo.blobs[before[path]].decode() if path in before else ""
            new = repo.blobs[after[path]].decode() if path in after else ""
            patch = "\n".join(list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm=""))[2:])
            out.append({"sha": after.get(path) or before.get(path), "filename": path, "status": status,
                        "additions": 1, "deletions": 1, "changes": 2, "patch": patch})
        return out

    # ---------------------------------------------------------------- routing
    def _login(self, request: web.Request) -> str | None:
        auth = request.headers.get("Authorization", "")
        scheme, _, cred = auth.partition(" ")
        if scheme.lower() in ("token", "bearer") and cred in self.tokens:
            return self.tokens[cred]
        return None

    async def _dispatch(self, request: web.Request) -> web.Response:
        body: Any = None
        if request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                return web.json_response({"message": "Problems parsing JSON"}, status=400)
        path = request.path
        login = self._login(request)
        self.requests.append((request.method, path, login))
        for hook in list(self.before):
            hook(request.method, path, body)
        for key, status in list(self.fail.items()):
            method, _, prefix = key.partition(" ")
            if method == request.method and path.startswith(prefix):
                del self.fail[key]
                return web.json_response({"message": "injected failure"}, status=status)
        if path.startswith("/app") or (path.startswith("/repos/") and path.endswith("/installation")):
            return self._app_route(request, path, body)
        if login is None:
            return web.json_response({"message": "Bad credentials"}, status=401)
        with self._lock:
            status, payload = self._route(request.method, path, dict(request.query), body or {}, login)
        return web.json_response(payload, status=status)

    def _app_route(self, request: web.Request, path: str, body: Any) -> web.Response:
        import jwt

        if self.app is None:
            return web.json_response({"message": "Not Found"}, status=404)
        scheme, _, cred = request.headers.get("Authorization", "").partition(" ")
        try:
            claims = jwt.decode(cred, self.app["public_key"], algorithms=["RS256"])
        except jwt.PyJWTError as exc:
            return web.json_response({"message": f"bad JWT: {exc}"}, status=401)
        if str(claims.get("iss")) != str(self.app["id"]):
            return web.json_response({"message": "wrong issuer"}, status=401)
        parts = path.strip("/").split("/")
        if len(parts) == 4 and parts[0] == "repos" and parts[3] == "installation":
            name = f"{parts[1]}/{parts[2]}"
            inst = next((i for i, r in self.app["installations"].items() if r == name), None)
            if inst is None:
                return web.json_response({"message": "Not Found"}, status=404)
            return web.json_response({"id": inst, "app_id": self.app["id"], "account": self._user(parts[1])})
        if parts == ["app"]:
            return web.json_response({"id": self.app["id"], "slug": self.app["slug"], "name": "ASAP",
                                      "owner": self._user("acme")})
        if len(parts) == 4 and parts[1] == "installations" and parts[3] == "access_tokens":
            inst = int(parts[2])
            if inst not in self.app["installations"]:
                return web.json_response({"message": "Not Found"}, status=404)
            token = f"ghs_{_sha(inst, time.time_ns())[:20]}"
            expires = datetime.now(UTC) + timedelta(seconds=self.token_ttl_s)
            self.tokens[token] = f"{self.app['slug']}[bot]"
            self.issued_tokens.append((token, expires.timestamp()))
            return web.json_response({"token": token, "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}, status=201)
        return web.json_response({"message": "Not Found"}, status=404)

    def _route(self, method: str, path: str, query: dict[str, str], body: dict[str, Any],
               login: str) -> tuple[int, Any]:
        nf = (404, {"message": "Not Found"})
        parts = path.strip("/").split("/")
        if parts == ["user"]:
            return 200, self._user(login)
        if parts[0] == "orgs" and len(parts) >= 4 and parts[2] == "teams":
            members = self.teams.get((parts[1], parts[3]))
            if members is None:
                return nf
            if len(parts) == 4:
                return 200, {"id": int(_sha(parts[1], parts[3])[:6], 16), "slug": parts[3], "name": parts[3],
                             "url": f"{self.base_url}/orgs/{parts[1]}/teams/{parts[3]}"}
            if len(parts) == 6 and parts[4] == "memberships":
                return (200, {"state": "active", "role": "member", "url": ""}) if parts[5] in members else nf
            return nf
        if parts[0] != "repos" or len(parts) < 3:
            return nf
        repo = self.repos.get(f"{parts[1]}/{parts[2]}")
        if repo is None:
            return nf
        rest = parts[3:]
        if not rest:
            return 200, self._repo_json(repo)
        head = rest[0]
        if head == "contents":
            text = self.file_at(repo.name, query.get("ref") or repo.default_branch, "/".join(rest[1:]))
            if text is None:
                return nf
            p = "/".join(rest[1:])
            return 200, {"type": "file", "encoding": "base64", "name": p.rsplit("/", 1)[-1], "path": p,
                         "sha": _sha(p, text), "size": len(text), "url": f"{self.base_url}/repos/{repo.name}/contents/{p}",
                         "content": base64.b64encode(text.encode()).decode()}
        if head == "git":
            return self._git_route(repo, method, rest[1:], body)
        if head == "pulls":
            return self._pulls_route(repo, method, rest[1:], query, body, login)
        if head == "issues":
            return self._issues_route(repo, method, rest[1:], body, login)
        if head == "statuses" and method == "POST" and len(rest) == 2:
            if body.get("state") not in ("error", "failure", "pending", "success"):
                return 422, {"message": "Validation Failed"}
            st = {"sha": rest[1], "state": body["state"], "description": body.get("description"),
                  "context": body.get("context", "default"), "target_url": body.get("target_url"), "id": self._id()}
            repo.statuses.append(st)
            return 201, {**st, "url": f"{self.base_url}/repos/{repo.name}/statuses/{rest[1]}", "creator": self._user(login)}
        if head == "check-runs":
            return self._checks_route(repo, method, rest[1:], body, login)
        if head == "collaborators" and len(rest) == 3 and rest[2] == "permission":
            user = rest[1]
            perm = repo.collaborators.get(user, "none" if user not in repo.collaborators else "read")
            return 200, {"permission": perm, "role_name": perm, "user": self._user(user)}
        return nf

    def _checks_route(self, repo: RepoState, method: str, rest: list[str], body: dict[str, Any],
                      login: str) -> tuple[int, Any]:
        nf = (404, {"message": "Not Found"})
        if method in ("POST", "PATCH") and not login.endswith("[bot]"):  # a user's token, not an App's
            return 403, {"message": "You must authenticate via a GitHub App.",
                         "documentation_url": "https://docs.github.com/rest/reference/checks#create-a-check-run"}
        if not rest and method == "POST":
            if not body.get("name") or not body.get("head_sha"):
                return 422, {"message": "Invalid request.\n\n\"name\", \"head_sha\" weren't supplied."}
            run = _example_json("rest/check-run.json")
            cid = self._id()
            url = f"{self.base_url}/repos/{repo.name}/check-runs/{cid}"
            run.update(id=cid, url=url, html_url=f"https://github.example/{repo.name}/runs/{cid}", name=body["name"],
                       head_sha=body["head_sha"], details_url=body.get("details_url"), external_id=body.get("external_id"),
                       status=body.get("status", "queued"), conclusion=None, completed_at=None, pull_requests=[],
                       annotations=[], output={"title": None, "summary": None, "text": None, "annotations_count": 0,
                                               "annotations_url": f"{url}/annotations"})
            run["app"].update(slug=login.removesuffix("[bot]"))
            err = self._apply_check(run, body)
            if err:
                return err
            repo.check_runs[cid] = run
            return 201, self._check_json(run)
        if len(rest) != 1 or not rest[0].isdigit() or int(rest[0]) not in repo.check_runs:
            return nf
        run = repo.check_runs[int(rest[0])]
        if method == "GET":
            return 200, self._check_json(run)
        if method == "PATCH":
            staged = {**run, "output": dict(run["output"]), "annotations": list(run["annotations"])}
            err = self._apply_check(staged, body)
            if err:
                return err
            run.update(staged)
            return 200, self._check_json(run)
        return nf

    @staticmethod
    def _apply_check(run: dict[str, Any], body: dict[str, Any]) -> tuple[int, Any] | None:
        """Validate and apply a create/update body as GitHub does; a 422 answer, or None when applied."""
        conclusions = ("action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out")
        if body.get("conclusion") is not None and body["conclusion"] not in conclusions:
            return 422, {"message": f"Invalid request.\n\n{body['conclusion']!r} is not a member of conclusions."}
        out = body.get("output")
        if out is not None:
            if not out.get("title") or out.get("summary") is None:
                return 422, {"message": "Invalid request.\n\n\"title\", \"summary\" weren't supplied."}
            for key in ("summary", "text"):
                if len(out.get(key) or "") > 65535:
                    return 422, {"message": f"Invalid request.\n\nOnly 65535 characters are allowed; "
                                            f"{len(out[key])} were supplied."}
            notes = out.get("annotations") or []
            if len(notes) > 50:
                return 422, {"message": "Invalid request.\n\nOnly 50 annotations are allowed per request."}
            for a in notes:
                if a.get("annotation_level") not in ("notice", "warning", "failure") or not a.get("path") \
                        or not isinstance(a.get("start_line"), int) or not isinstance(a.get("end_line"), int) \
                        or not a.get("message"):
                    return 422, {"message": "Invalid request.\n\nannotation is missing path, start_line, end_line, "
                                            "annotation_level or message."}
            run["output"].update(title=out["title"], summary=out["summary"], text=out.get("text"))
            run["annotations"].extend(notes)
            run["output"]["annotations_count"] = len(run["annotations"])
        if body.get("conclusion") is not None:
            run.update(conclusion=body["conclusion"], status="completed", completed_at=_now())
        elif body.get("status"):
            run["status"] = body["status"]
        for key in ("name", "details_url", "external_id"):
            if key in body:
                run[key] = body[key]
        return None

    @staticmethod
    def _check_json(run: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in run.items() if k != "annotations"}

    def _git_route(self, repo: RepoState, method: str, rest: list[str], body: dict[str, Any]) -> tuple[int, Any]:
        nf = (404, {"message": "Not Found"})
        if rest[:1] == ["ref"] and method == "GET":
            ref = "/".join(rest[1:])
            return (200, self._ref_json(repo, ref)) if ref in repo.refs else nf
        if rest == ["refs"] and method == "POST":
            ref = str(body.get("ref", ""))
            if not ref.startswith("refs/heads/") or body.get("sha") not in repo.commits:
                return 422, {"message": "Validation Failed"}
            short = ref[len("refs/"):]
            if short in repo.refs:
                return 422, {"message": "Reference already exists"}
            repo.refs[short] = body["sha"]
            return 201, self._ref_json(repo, short)
        if rest[:1] == ["refs"] and method == "PATCH":
            ref = "/".join(rest[1:])
            if ref not in repo.refs or body.get("sha") not in repo.commits:
                return 422, {"message": "Reference does not exist"}
            old, new = repo.refs[ref], body["sha"]
            if not body.get("force") and old not in self._ancestors(repo, new):
                return 422, {"message": "Update is not a fast forward"}
            repo.refs[ref] = new
            for pr in repo.pulls.values():
                if f"heads/{pr['head']}" == ref and pr["state"] == "open":
                    pr["head_sha"] = new
            return 200, self._ref_json(repo, ref)
        if rest[:1] == ["commits"] and method == "GET" and len(rest) == 2:
            return (200, self._commit_json(repo, rest[1])) if rest[1] in repo.commits else nf
        if rest == ["blobs"] and method == "POST":
            content = body.get("content", "")
            data = base64.b64decode(content) if body.get("encoding") == "base64" else str(content).encode("utf-8")
            sha = _sha("blob", data.hex())
            repo.blobs[sha] = data
            return 201, {"sha": sha, "url": f"{self.base_url}/repos/{repo.name}/git/blobs/{sha}"}
        if rest == ["trees"] and method == "POST":
            entries = dict(repo.trees.get(body.get("base_tree", ""), {})) if body.get("base_tree") else {}
            for e in body.get("tree", []):
                if e.get("sha") is None:
                    entries.pop(e["path"], None)
                elif e["sha"] not in repo.blobs:
                    return 422, {"message": "tree.sha is not a blob"}
                else:
                    entries[e["path"]] = e["sha"]
            sha = _sha("tree", sorted(entries.items()))
            repo.trees[sha] = entries
            return 201, {"sha": sha, "url": f"{self.base_url}/repos/{repo.name}/git/trees/{sha}",
                         "tree": [{"path": p, "mode": "100644", "type": "blob", "sha": s} for p, s in sorted(entries.items())]}
        if rest == ["commits"] and method == "POST":
            if body.get("tree") not in repo.trees or any(p not in repo.commits for p in body.get("parents", [])):
                return 422, {"message": "Validation Failed"}
            author = body.get("author") or {"name": "asap", "email": "unknown@example.com"}
            committer = body.get("committer") or author
            sha = self._make_commit(repo, body["tree"], list(body.get("parents", [])), body.get("message", ""),
                                    {"name": author["name"], "email": author["email"]},
                                    {"name": committer["name"], "email": committer["email"]})
            return 201, self._commit_json(repo, sha)
        return nf

    def _ancestors(self, repo: RepoState, sha: str) -> set[str]:
        seen, todo = set(), [sha]
        while todo:
            s = todo.pop()
            if s in seen or s not in repo.commits:
                continue
            seen.add(s)
            todo.extend(repo.commits[s]["parents"])
        return seen

    def _pulls_route(self, repo: RepoState, method: str, rest: list[str], query: dict[str, str],
                     body: dict[str, Any], login: str) -> tuple[int, Any]:
        nf = (404, {"message": "Not Found"})
        if not rest and method == "GET":
            state = query.get("state", "open")
            prs = [p for p in repo.pulls.values() if state == "all" or p["state"] == state]
            if query.get("head"):
                prs = [p for p in prs if f"{repo.name.split('/')[0]}:{p['head']}" == query["head"]]
            return 200, [self._pull_json(repo, p) for p in prs]
        if not rest and method == "POST":
            head, base = body.get("head", ""), body.get("base", "")
            if f"heads/{head}" not in repo.refs or f"heads/{base}" not in repo.refs:
                return 422, {"message": "Validation Failed: head or base does not exist"}
            if any(p["head"] == head and p["state"] == "open" for p in repo.pulls.values()):
                return 422, {"message": f"A pull request already exists for {head}."}
            n = self._new_pull(repo, head, base, body.get("title", ""), body.get("body") or "", login)
            return 201, self._pull_json(repo, repo.pulls[n])
        if not rest[0].isdigit() or int(rest[0]) not in repo.pulls:
            return nf
        pr = repo.pulls[int(rest[0])]
        if len(rest) == 1 and method == "GET":
            return 200, self._pull_json(repo, pr)
        if len(rest) == 1 and method == "PATCH":
            for k in ("title", "body", "state"):
                if k in body:
                    pr[k] = body[k]
            return 200, self._pull_json(repo, pr)
        if rest[1:] == ["files"] and method == "GET":
            return 200, self._pull_files(repo, pr)
        return nf

    def _issues_route(self, repo: RepoState, method: str, rest: list[str], body: dict[str, Any],
                      login: str) -> tuple[int, Any]:
        nf = (404, {"message": "Not Found"})
        if rest[:1] == ["comments"] and len(rest) == 2 and method == "PATCH":
            cid = int(rest[1]) if rest[1].isdigit() else -1
            if cid not in repo.comments:
                return nf
            if repo.comments[cid]["user"] != login:
                return 403, {"message": "Must be the comment's author"}
            repo.comments[cid].update(body=body.get("body", ""), updated_at=_now())
            repo.comments[cid]["edits"] = repo.comments[cid].get("edits", 0) + 1
            return 200, self._comment_json(repo, cid)
        if not rest or not rest[0].isdigit():
            return nf
        n = int(rest[0])
        if len(rest) == 1 and method == "GET":
            return 200, {"number": n, "id": n, "title": "", "state": "open",
                         "url": f"{self.base_url}/repos/{repo.name}/issues/{n}", "user": self._user("dev")}
        if rest[1:] == ["comments"] and method == "GET":
            return 200, [self._comment_json(repo, c) for c, v in sorted(repo.comments.items()) if v["issue"] == n]
        if rest[1:] == ["comments"] and method == "POST":
            cid = self._id()
            repo.comments[cid] = {"issue": n, "body": body.get("body", ""), "user": login,
                                  "created_at": _now(), "updated_at": _now(), "edits": 0}
            return 201, self._comment_json(repo, cid)
        return nf


def _example_json(rel: str) -> dict[str, Any]:
    """A published GitHub example under ``tests/data/github`` (see the README there), freshly loaded."""
    import json as _json

    return _json.loads((Path(__file__).resolve().parents[1] / "data" / "github" / rel).read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------- webhook harness
class WebhookHarness:
    """The REAL runtime server (``bot.runtime.server.build_app``) on 127.0.0.1 with the GitHub route, an
    in-process queue on a SQLite store, and the GitHub integration pointed at a :class:`GitHubRestDouble`.

    ``await h.deliver(event, payload)`` signs and POSTs a delivery; ``await h.drain()`` runs a worker until
    the queue is empty.
    """

    def __init__(self, double: GitHubRestDouble, tmp: Any, *, secret: bytes = b"whsec-test", runs_dir: str | None = None,
                 user_rate: tuple[int, float] = (1000, 60.0), apply_teams: tuple[str, ...] = (),
                 bot_login: str | None = "asap-bot", auth: Any = None, review_report: str = "checks") -> None:
        self.double, self.tmp, self.secret, self.bot_login = double, tmp, secret, bot_login
        self.auth, self.review_report = auth, review_report  # auth: GitHubAuthSettings (an App); default a token
        self.runs_dir, self.user_rate, self.apply_teams = runs_dir, user_rate, apply_teams
        self.url = ""
        self.backlog = 1024  # a burst of connections must not overflow the accept queue (SYN retry = 1 s)
        self._n = 0

    async def __aenter__(self) -> WebhookHarness:
        from bot.runtime.context import RuntimeContext, RuntimeSettings
        from bot.runtime.limits import Rate
        from bot.runtime.queue import InProcessQueue, QueueSettings
        from bot.runtime.server import build_app
        from bot.store.sqlite_store import SQLiteStore
        from integrations.codehost.github import GitHubAuthSettings
        from integrations.github.config import GitHubIntegration

        store = SQLiteStore(self.tmp / "state.db")
        queue = InProcessQueue(store, settings=QueueSettings(block_ms=20, max_attempts=1))
        settings = RuntimeSettings(user_rate=Rate(*self.user_rate), channel_rate=Rate(10000, 60.0), max_pending=10000)
        self.ctx = RuntimeContext(settings=settings, store=store, queue=queue)
        auth = self.auth or GitHubAuthSettings(api_url=self.double.base_url, token="bot-token", bot_login=self.bot_login,
                                               retry=False)
        self.ctx.extras["github"] = GitHubIntegration(webhook_secret=self.secret, auth=auth, runs_dir=self.runs_dir,
                                                      apply_teams=self.apply_teams, review_report=self.review_report)
        app = build_app(self.ctx, env={"GITHUB_WEBHOOK_SECRET": self.secret.decode()})
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=self.backlog)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/github/webhook"  # type: ignore[union-attr]
        import aiohttp

        self.session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()
        await self._runner.cleanup()
        self.ctx.store.close()

    async def deliver(self, event: str, payload: dict[str, Any], *, delivery: str | None = None,
                      signature: str | None = None) -> tuple[int, dict[str, Any]]:
        import json as _json

        from integrations.github.webhook import sign

        self._n += 1
        body = _json.dumps(payload).encode()
        headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or f"d-{self._n}-{time.time_ns()}",
                   "Content-Type": "application/json",
                   "X-Hub-Signature-256": signature if signature is not None else sign(self.secret, body)}
        async with self.session.post(self.url, data=body, headers=headers) as resp:
            return resp.status, await resp.json()

    async def drain(self, timeout: float = 60.0) -> None:
        from bot.runtime.handlers import Dispatcher

        stop = asyncio.Event()
        task = asyncio.create_task(self.ctx.queue.run_worker(Dispatcher(self.ctx), consumer="test", stop=stop))
        deadline = time.monotonic() + timeout
        await asyncio.sleep(0.05)
        while await self.ctx.queue.depth() > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        stop.set()
        await task


def comment_event(repo: str, number: int, body: str, login: str = "alice", *, is_pull: bool = True,
                  comment_id: int = 1, app_id: int | None = None) -> dict[str, Any]:
    issue: dict[str, Any] = {"number": number, "title": "t"}
    if is_pull:
        issue["pull_request"] = {"url": f"https://api.example/repos/{repo}/pulls/{number}"}
    comment: dict[str, Any] = {"id": comment_id, "body": body, "user": {"login": login, "type": "User"}}
    if app_id is not None:
        comment["performed_via_github_app"] = {"id": app_id}
    return {"action": "created", "issue": issue, "comment": comment, "repository": {"full_name": repo},
            "sender": {"login": login}}


def pull_event(repo: str, number: int, head_sha: str, action: str = "opened", sender: str = "dev") -> dict[str, Any]:
    return {"action": action, "number": number, "pull_request": {"number": number, "head": {"sha": head_sha}},
            "repository": {"full_name": repo}, "sender": {"login": sender}}


# ------------------------------------------------------------------------------ published webhook examples
EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "github" / "webhooks"


def _example(name: str) -> dict[str, Any]:
    import json as _json

    return _json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))


def _retarget(payload: dict[str, Any], repo: str) -> None:
    """Point an example payload at ``repo`` (owner and name, as GitHub would send them)."""
    owner, name = repo.split("/")
    payload["repository"].update(full_name=repo, name=name)
    payload["repository"]["owner"]["login"] = owner


def example_comment_event(repo: str, number: int, body: str, login: str = "alice", *, action: str = "created",
                          comment_id: int = 1, before: str | None = None, is_pull: bool = True,
                          installation: int | None = None) -> dict[str, Any]:
    """octokit/webhooks' ``issue_comment.<action>`` example, re-aimed: repository, issue number, comment id,
    body and author; ``before`` is the body before an edit (``changes.body.from``)."""
    payload = _example(f"issue_comment.{action}")
    _retarget(payload, repo)
    payload["issue"]["number"] = number
    if is_pull:
        payload["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{repo}/pulls/{number}"}
    payload["comment"].update(id=comment_id, body=body)
    payload["comment"]["user"]["login"] = login
    payload["sender"]["login"] = login
    if action == "edited":
        payload["changes"] = {"body": {"from": before if before is not None else payload["changes"]["body"]["from"]}}
    if installation is not None:
        payload["installation"] = {"id": installation}
    return payload


def example_pull_event(repo: str, number: int, head_sha: str, action: str = "opened", sender: str = "dev") -> dict[str, Any]:
    """octokit/webhooks' ``pull_request.<action>`` example (opened or synchronize), re-aimed at ``repo``."""
    payload = _example(f"pull_request.{action}")
    _retarget(payload, repo)
    payload["number"] = number
    payload["pull_request"]["number"] = number
    payload["pull_request"]["head"]["sha"] = head_sha
    payload["sender"]["login"] = sender
    return payload
