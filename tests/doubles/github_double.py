"""A small GitHub REST double on 127.0.0.1 serving what PyGithub calls to list merged pull requests.

Endpoints (JSON shaped like GitHub's, only the fields PyGithub and ASAP read):
``GET /repos/{owner}/{repo}``, ``GET /repos/{owner}/{repo}/pulls`` (state/sort/direction, paginated with
``Link`` headers), ``GET /repos/{owner}/{repo}/pulls/{n}/files`` (with unified-diff ``patch``) and
``GET /repos/{owner}/{repo}/contents/{path}?ref=SHA`` (base64). Pull requests are described with
:class:`PR` and :class:`PRFile`; base and merge commits get synthetic SHAs so contents are served per
side. Every request path is kept in :attr:`GitHubDouble.requests` for assertions. Stdlib only.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse


@dataclass
class PRFile:
    filename: str
    before: str | None  # None: added
    after: str | None  # None: removed


@dataclass
class PR:
    number: int
    title: str
    body: str = ""
    merged: bool = True
    files: list[PRFile] = field(default_factory=list)
    updated_at: str = "2024-05-01T12:00:00Z"


def _sha(*parts: object) -> str:
    return hashlib.sha1("/".join(str(p) for p in parts).encode()).hexdigest()


class GitHubDouble:
    """``with GitHubDouble({"acme/llm": [PR(...)]}) as gh: Github(base_url=gh.base_url)``."""

    def __init__(self, repos: dict[str, list[PR]], per_page: int = 30) -> None:
        self.repos = repos
        self.per_page = per_page
        self.requests: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> GitHubDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ---------------------------------------------------------------- payloads
    def _repo_json(self, name: str) -> dict[str, Any]:
        owner, repo = name.split("/")
        return {
            "id": int(_sha(name)[:6], 16), "name": repo, "full_name": name,
            "owner": {"login": owner, "id": 1, "type": "Organization"},
            "url": f"{self.base_url}/repos/{name}", "html_url": f"https://github.example/{name}",
            "default_branch": "main", "private": False,
        }

    def _pr_json(self, name: str, pr: PR) -> dict[str, Any]:
        base_sha, merge_sha = _sha(name, pr.number, "base"), _sha(name, pr.number, "merge")
        return {
            "id": pr.number * 1000, "number": pr.number, "state": "closed", "title": pr.title, "body": pr.body,
            "url": f"{self.base_url}/repos/{name}/pulls/{pr.number}",
            "html_url": f"https://github.example/{name}/pull/{pr.number}",
            "merged_at": pr.updated_at if pr.merged else None, "updated_at": pr.updated_at,
            "closed_at": pr.updated_at, "created_at": "2024-04-01T12:00:00Z",
            "merge_commit_sha": merge_sha if pr.merged else None,
            "base": {"ref": "main", "sha": base_sha, "repo": self._repo_json(name)},
            "head": {"ref": f"pr-{pr.number}", "sha": _sha(name, pr.number, "head"), "repo": self._repo_json(name)},
            "user": {"login": "dev", "id": 2, "type": "User"},
        }

    def _file_json(self, f: PRFile) -> dict[str, Any]:
        status = "added" if f.before is None else "removed" if f.after is None else "modified"
        diff = difflib.unified_diff((f.before or "").splitlines(), (f.after or "").splitlines(), lineterm="", n=3)
        patch = "\n".join(list(diff)[2:])
        return {"sha": _sha(f.filename, f.after), "filename": f.filename, "status": status, "patch": patch,
                "additions": 1, "deletions": 1, "changes": 2}

    def _contents(self, name: str, path: str, ref: str) -> dict[str, Any] | None:
        for pr in self.repos.get(name, []):
            for f in pr.files:
                if f.filename != path:
                    continue
                if ref == _sha(name, pr.number, "base") and f.before is not None:
                    text = f.before
                elif ref == _sha(name, pr.number, "merge") and f.after is not None:
                    text = f.after
                else:
                    continue
                return {"type": "file", "encoding": "base64", "name": path.rsplit("/", 1)[-1], "path": path,
                        "sha": _sha(path, ref), "size": len(text), "url": f"{self.base_url}/repos/{name}/contents/{path}",
                        "content": base64.b64encode(text.encode()).decode()}
        return None

    # ---------------------------------------------------------------- routing
    def _route(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any, dict[str, str]]:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if len(parts) < 3 or parts[0] != "repos":
            return 404, {"message": "Not Found"}, {}
        name = f"{parts[1]}/{parts[2]}"
        if name not in self.repos:
            return 404, {"message": "Not Found"}, {}
        rest = parts[3:]
        if not rest:
            return 200, self._repo_json(name), {}
        if rest == ["pulls"]:
            state = query.get("state", ["open"])[0]
            prs = [p for p in self.repos[name] if state in ("closed", "all")]
            prs.sort(key=lambda p: p.updated_at, reverse=query.get("direction", ["desc"])[0] == "desc")
            return self._page(f"/repos/{name}/pulls", query, [self._pr_json(name, p) for p in prs])
        if len(rest) == 3 and rest[0] == "pulls" and rest[2] == "files":
            pr = next((p for p in self.repos[name] if str(p.number) == rest[1]), None)
            if pr is None:
                return 404, {"message": "Not Found"}, {}
            return self._page(f"/repos/{name}/pulls/{pr.number}/files", query, [self._file_json(f) for f in pr.files])
        if rest and rest[0] == "contents":
            got = self._contents(name, "/".join(rest[1:]), query.get("ref", [""])[0])
            return (200, got, {}) if got else (404, {"message": "Not Found"}, {})
        return 404, {"message": "Not Found"}, {}

    def _page(self, path: str, query: dict[str, list[str]], items: list[Any]) -> tuple[int, Any, dict[str, str]]:
        per = int(query.get("per_page", [self.per_page])[0])
        page = int(query.get("page", ["1"])[0])
        chunk = items[(page - 1) * per: page * per]
        headers = {}
        if page * per < len(items):
            q = {k: v[0] for k, v in query.items()}
            q.update(page=str(page + 1), per_page=str(per))
            qs = "&".join(f"{k}={v}" for k, v in q.items())
            headers["Link"] = f'<{self.base_url}{path}?{qs}>; rel="next"'
        return 200, chunk, headers

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                double.requests.append(self.path)
                status, body, headers = double._route(url.path, parse_qs(url.query))
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        return Handler
