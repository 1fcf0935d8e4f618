// Measures a suite's HTML report (pyrualean report) as Debian's headless Chromium lays it out, for
// report/layout_test.go: the page title, each chart's y-axis ticks, frame, bars and legend (their
// boxes on the page), the settings text and the paper table's shape. With SCREENSHOT set it saves a
// full-page screenshot there. The network is cut off: the report must need nothing from it.
//
// Environment: REPORT (path of the report), SCREENSHOT (optional PNG path), CHROMIUM (default
// /usr/bin/chromium). Prints one JSON line with what it measured; the Go test judges it.
import { chromium } from "playwright-core";
import { pathToFileURL } from "node:url";

const report = process.env.REPORT;
if (!report) {
  console.error("report_layout.mjs: set REPORT");
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
});
const seen = { errors: [], blocked: [] };
try {
  const context = await browser.newContext({ offline: true, viewport: { width: 1280, height: 900 } });
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith("file://")) return route.continue();
    seen.blocked.push(url);
    return route.abort();
  });
  const page = await context.newPage();
  page.on("pageerror", (e) => seen.errors.push(e.message));
  await page.goto(pathToFileURL(report).href, { waitUntil: "load", timeout: 30000 });
  seen.title = await page.title();
  seen.h1 = (await page.locator("h1").innerText()).trim();
  seen.charts = await page.locator("figure.plot svg.chart").evaluateAll((svgs) => svgs.map((svg) => {
    const box = (el) => {
      const r = el.getBoundingClientRect();
      return { left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height };
    };
    return {
      title: svg.getAttribute("aria-label"),
      percent: svg.getAttribute("data-percent") === "true",
      svg: box(svg),
      frame: box(svg.querySelector("rect.frame")),
      legend: box(svg.querySelector("g.legend")),
      legendNames: [...svg.querySelectorAll("g.legend text")].map((t) => t.textContent),
      yticks: [...svg.querySelectorAll("text.ytick")].map((t) => ({ text: t.textContent, value: Number(t.getAttribute("data-value")) })),
      bars: [...svg.querySelectorAll("path.bar")].map((p) => ({ arm: p.dataset.arm, category: p.dataset.category, value: Number(p.dataset.value), ...box(p) })),
      errbars: [...svg.querySelectorAll("path.errbar")].map(box),
    };
  }));
  seen.settings = await page.locator("pre.matrix").innerText();
  seen.paper = await page.locator("table.paper").evaluateAll((ts) => ts.map((t) => ({
    header: [...t.querySelectorAll("th")].map((th) => th.textContent),
    rows: [...t.querySelectorAll("tr")].slice(1).map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)),
  })));
  seen.notFinal = await page.locator("p.notfinal").count();
  if (process.env.SCREENSHOT) {
    await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
    seen.screenshot = process.env.SCREENSHOT;
  }
} catch (e) {
  seen.errors.push(String(e));
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
process.exit(seen.errors.length === 0 ? 0 : 1);
