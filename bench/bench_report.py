"""How big report.html gets and how fast it opens: Dracula (46 documents) and a 1,000-document corpus.

Each corpus is run through the whole pipeline over the scripted server (two relevance rounds, schema,
population, agent); then report.html is written again (median time), and opened in Debian's headless
chromium, measuring time to ready (navigation start to the page's data-ready mark: the JSON parsed and
every view drawn, document texts left until one is opened), the time a citation takes to open its
document with the passage highlighted, and the time a filter of the records table takes.

    .venv/bin/python bench/bench_report.py [--data ../shared/data] [--docs 1000] [--chars 8000] [--loads 5]
                                           [--screenshot docs/images/report.png] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.report.browser import start_chromium  # noqa: E402

import r3con  # noqa: E402
from r3con.pipeline.method import run  # noqa: E402
from r3con.report import write_report  # noqa: E402
from r3con.testing import FakeLLMServer, FaultPlan  # noqa: E402

OPEN_CITATION = """
const done = arguments[arguments.length - 1], id = arguments[0];
const t0 = performance.now();
window.addEventListener('hashchange', () => requestAnimationFrame(() => done([
    performance.now() - t0, document.querySelectorAll('#doc-view mark.active').length])), {once: true});
location.hash = '#rec/' + id;
"""
FILTER = """
const input = document.getElementById('record-filter'), t0 = performance.now();
input.value = arguments[0]; input.dispatchEvent(new Event('input'));
const t = performance.now() - t0; input.value = ''; input.dispatchEvent(new Event('input'));
return t;
"""


def synthetic(data: Path, count: int, chars: int) -> list[r3con.Document]:
    """`count` documents of `chars` characters cut from Dracula's text (cycled), each starting at a paragraph."""
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted((data / "dracula" / "docs").glob("*.txt")))
    items, at = [], 0
    for i in range(count):
        start = text.find("\n\n", at) + 2 if i else 0
        piece = (text[start:] + "\n\n" + text)[:chars]
        items.append((f"Excerpt {i + 1}", piece))
        at = (start + chars) % (len(text) - chars)
    return r3con.documents_from_texts(items)


async def pipeline(question: str, docs: list[r3con.Document], out: Path) -> tuple[r3con.RunResult, float]:
    with FakeLLMServer(faults=FaultPlan(invent=0.2, reword=0.3, seed=5)) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=out,
                                          unverified="keep", cache=False, concurrency=16)
        started = time.perf_counter()
        result = await run(question, docs, settings)
        return result, time.perf_counter() - started


def measure(name: str, result: r3con.RunResult, driver, loads: int) -> dict[str, object]:
    writes = []
    for _ in range(3):
        t0 = time.perf_counter()
        path = write_report(result.run_dir)
        writes.append(time.perf_counter() - t0)
    ready, citation, filtering = [], [], []
    cited = next((e for e in result.evidence if e.span), None)
    for _ in range(loads):
        driver.get("about:blank")
        driver.get(path.resolve().as_uri())
        for _ in range(600):
            value = driver.find_element("css selector", "html").get_attribute("data-ready")
            if value:
                break
            time.sleep(0.02)
        ready.append(float(value))
        if cited is not None:
            took, marks = driver.execute_async_script(OPEN_CITATION, cited.id)
            assert marks, "the citation's passage is highlighted"
            citation.append(took)
        filtering.append(driver.execute_script(FILTER, "the"))
    docs = sum(len(d.text) for d in result.documents)
    return {
        "corpus": name, "documents": len(result.documents), "text_mb": round(docs / 1e6, 2),
        "records": sum(len(v) for v in result.records.values()), "calls": result.usage.calls,
        "report_mb": round(path.stat().st_size / 1e6, 2), "write_s": round(statistics.median(writes), 3),
        "ready_ms": round(statistics.median(ready)), "ready_max_ms": round(max(ready)),
        "citation_ms": round(statistics.median(citation)) if citation else None,
        "filter_ms": round(statistics.median(filtering), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--chars", type=int, default=8000)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--screenshot", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    question = json.loads((args.data / "dracula" / "questions.json").read_text())[0]["question"]
    corpora = [("Dracula", r3con.load_documents([args.data / "dracula" / "docs"]))]
    if args.docs:
        corpora.append((f"{args.docs} excerpts of {args.chars:,} chars", synthetic(args.data, args.docs, args.chars)))
    driver = start_chromium(1400, 900)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as out:
            for name, docs in corpora:
                result, took = asyncio.run(pipeline(question, docs, Path(out)))
                row = measure(name, result, driver, args.loads)
                row["run_s"] = round(took, 1)
                rows.append(row)
                print(json.dumps(row) if args.json else row, flush=True)
                if args.screenshot and name == "Dracula":
                    cited = next(e for e in result.evidence if e.span)
                    driver.get(result.report.resolve().as_uri() + f"#rec/{cited.id}")
                    time.sleep(1)
                    args.screenshot.parent.mkdir(parents=True, exist_ok=True)
                    driver.save_screenshot(str(args.screenshot))
    finally:
        driver.quit()
    if not args.json:
        print("\n| corpus | documents | text MB | records | report.html MB | write s | ready ms (median, max) | citation ms | filter ms |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['corpus']} | {r['documents']:,} | {r['text_mb']} | {r['records']:,} | {r['report_mb']} | "
                  f"{r['write_s']} | {r['ready_ms']}, {r['ready_max_ms']} | {r['citation_ms']} | {r['filter_ms']} |")


if __name__ == "__main__":
    main()
