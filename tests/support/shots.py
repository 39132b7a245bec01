"""Screenshots of the customer's pages at a desktop's and a phone's size, and the page's width checked at each:
nothing may scroll sideways. The shots go to test-artifacts/ (git-ignored); docs/pages/ keeps a run's copies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
SIZES = {"1440": DESKTOP, "390": PHONE}


async def new_page(browser: Any, viewport: dict[str, int]) -> Any:
    phone = viewport["width"] < 600
    context = await browser.new_context(viewport=viewport, device_scale_factor=1, is_mobile=phone, has_touch=phone)
    return await context.new_page()


async def shoot(page: Any, artifacts: Path, name: str) -> None:
    """A full-page screenshot `name`.png, after checking that the page is no wider than the screen."""
    width = page.viewport_size["width"]
    scroll = await page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{name}: {scroll} px wide on a {width} px screen"
    await page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
