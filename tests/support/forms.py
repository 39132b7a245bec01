"""Post a page's form as a browser would: fetch the page, keep its hidden fields (the CSRF token), post; and
read a page's text as its reader sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

import httpx


@dataclass
class Form:
    action: str
    fields: dict[str, str] = field(default_factory=dict)


class _Forms(HTMLParser):
    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base
        self.forms: dict[str, Form] = {}
        self._current: Form | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "form":
            self._current = Form(urljoin(self.base, values.get("action", "")))
            self.forms[values.get("id", str(len(self.forms)))] = self._current
        elif tag == "input" and self._current is not None and values.get("type") == "hidden":
            self._current.fields[values["name"]] = values.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._current = None


async def page_forms(http: httpx.AsyncClient, url: str) -> dict[str, Form]:
    """The forms of the page at `url`, by id, with their hidden fields."""
    page = await http.get(url)
    assert page.status_code == 200, (url, page.status_code, page.text[:300])
    parser = _Forms(str(page.url))
    parser.feed(page.text)
    return parser.forms


async def post_form(http: httpx.AsyncClient, form: Form, **fields: Any) -> httpx.Response:
    return await http.post(form.action, data={**form.fields, **{k: str(v) for k, v in fields.items()}})


async def submit(http: httpx.AsyncClient, url: str, form_id: str, **fields: Any) -> httpx.Response:
    """Open the page at `url` and send its form `form_id` with `fields` added."""
    forms = await page_forms(http, url)
    return await post_form(http, forms[form_id], **fields)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script", "title"):
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "title"):
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def visible_text(html: str) -> str:
    """What a reader of the page sees: its text, without tags, attributes, styles and scripts, spaces folded."""
    parser = _Text()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())
