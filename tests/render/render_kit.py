"""What the HTML report's tests share: a tiny DOM (ids, classes and text without a browser), a
log with many findings, and a page opened in Chromium that records every console message, request
and dialog."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

SEED_KEY = "ledger/export/2026-07-26"
HOSTILE_KEY = "<script>alert(1)</script>"


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: "Node | None") -> None:
        self.tag, self.attrs, self.parent, self.children = tag, attrs, parent, []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list["Node"]:
        return [n for n in self.iter() if (tag is None or n.tag == tag)
                and (cls is None or cls in (n.attrs.get("class") or "").split())]


class _Builder(HTMLParser):
    VOID = {"meta", "link", "br", "img", "input", "col", "hr", "source", "wbr"}
    SVG_EMPTY = {"rect", "line", "circle", "path", "use"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.cur)
        self.cur.children.append(node)
        if tag not in self.VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, dict(attrs), self.cur))

    def handle_endtag(self, tag):
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None and node.parent is not None, f"stray </{tag}>"
        self.cur = node.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def dom(text: str) -> Node:
    b = _Builder()
    b.feed(text)
    b.close()
    assert b.cur is b.root, f"unclosed <{b.cur.tag}>"
    return b.root


def ids(root: Node) -> list[str]:
    return [n.attrs["id"] for n in root.iter() if n.attrs.get("id")]


def write_many_findings(path: Path, keys: int, long_key_events: int) -> Path:
    """``keys`` workflow keys shaped like the seed's unsafe takeover (4 findings each); the first key
    has ``long_key_events`` progress events before the takeover, so its timeline must be capped."""
    seq = 0
    with path.open("w") as out:
        for k in range(keys):
            key = f"tenant-{k % 7}/export/run-{k:05d}"

            def emit(kind, epoch, worker, **extra):
                nonlocal seq
                seq += 1
                out.write(json.dumps({"seq": seq, "workflow_key": key, "kind": kind, "epoch": epoch,
                                      "worker": worker,
                                      "reporter": "sink" if kind == "effect_committed" else "worker",
                                      **extra}) + "\n")

            emit("lease_acquired", 1, "alpha")
            for _ in range(long_key_events if k == 0 else 1):
                emit("progress", 1, "alpha")
            emit("lease_acquired", 2, "beta")
            emit("progress", 1, "alpha")
            emit("effect_attempted", 1, "alpha", effect_key=f"out:{k}")
            emit("effect_committed", 1, "alpha", effect_key=f"out:{k}")
            emit("effect_committed", 2, "beta", effect_key=f"out:{k}")
    return path


BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"]



def open_page(browser, path: Path, **kw):
    page = browser.new_page(viewport={"width": 1280, "height": 900}, **kw)
    problems: list[str] = []
    def on_console(m):
        if m.type in ("error", "warning"):
            problems.append(f"console {m.type}: {m.text}")

    def on_request(r):
        if not r.url.startswith(("file:", "data:")):
            problems.append(f"request: {r.url}")

    page.on("console", on_console)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("request", on_request)
    page.goto(path.resolve().as_uri())
    return page, problems

