// Helpers for the console's end-to-end scripts (run by e2e/console_test.go): Debian's
// Chromium through playwright-core, sign-in, screenshots, axe-core scans, and checks that
// the page reported no CSP violation and kept no credential in the browser's storage.
import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export function log(...a) {
  console.log(...a);
}

export function fail(msg) {
  throw new Error(msg);
}

export function expect(cond, msg) {
  if (!cond) fail(msg);
}

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

// newPage opens a page that records CSP violations, console errors and page errors.
export async function newPage(browser, base, viewport = { width: 1400, height: 900 }) {
  const context = await browser.newContext({ viewport, baseURL: base });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  const page = await context.newPage();
  page.problems = [];
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  // Failed responses are judged by their URL below; the browser's own line about them
  // names none.
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) page.problems.push('console: ' + m.text());
  });
  page.on('response', (r) => {
    const expected = r.url().endsWith('/api/v1/session') && (r.status() === 400 || r.status() === 401);
    if (r.status() >= 400 && !expected) page.problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`);
  });
  page.on('pageerror', (e) => page.problems.push('page error: ' + e.message));
  page.on('request', (r) => {
    if (!r.url().startsWith(base) && !r.url().startsWith(base.replace('http', 'ws')) && !r.url().startsWith('data:')) page.problems.push('request to another origin: ' + r.url());
  });
  return { context, page };
}

// clean fails when the page reported a CSP violation or an error.
export async function clean(page, where) {
  const csp = await page.evaluate(() => window.__csp || []);
  expect(csp.length === 0, `${where}: CSP violations: ${csp.join('; ')}`);
  expect(page.problems.length === 0, `${where}: ${page.problems.join('; ')}`);
}

export async function shot(page, dir, name, fullPage = true) {
  const path = join(dir, name + '.png');
  await page.screenshot({ path, fullPage });
  log('screenshot', path);
}

// axe scans the page as it is, in the light theme and in the dark one (the browser's
// prefers-color-scheme, which the console follows while no theme is chosen), and fails on
// any serious or critical violation. With SHOTS set it keeps a screenshot of the dark page.
export async function axe(page, where) {
  await page.evaluate(axeSource);
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.waitForFunction((s) => (document.documentElement.dataset.theme || 'light') === s, scheme);
    const res = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    const bad = res.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    for (const v of res.violations) log(`axe ${where} (${scheme}): ${v.impact} ${v.id}: ${v.help} (${v.nodes.length})`);
    if (scheme === 'dark' && process.env.SHOTS) await shot(page, process.env.SHOTS, 'dark-' + where.replace(/[^a-z0-9]+/gi, '-'));
    expect(bad.length === 0, `${where} (${scheme} theme): axe found ${bad.map((v) => `${v.impact} ${v.id}: ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`).join('; ')}`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
  await page.waitForFunction(() => (document.documentElement.dataset.theme || 'light') === 'light');
}

// The console's preferences in localStorage (not credentials): the theme chosen and the
// fleet columns hidden.
const preferences = new Set(['apelora.theme', 'apelora.fleet.hiddenColumns']);

// noStoredCredential fails when anything but the console's preferences is in localStorage,
// anything is in sessionStorage, or the session cookie is readable by script.
export async function noStoredCredential(page, where) {
  const s = await page.evaluate(() => ({ local: Object.keys(localStorage), session: sessionStorage.length, cookie: document.cookie }));
  const other = s.local.filter((k) => !preferences.has(k));
  expect(other.length === 0 && s.session === 0, `${where}: browser storage holds ${other.length} local items (${other.join(', ')}) besides preferences and ${s.session} session items`);
  expect(!s.cookie.includes('apelora_session'), `${where}: the session cookie is readable by script`);
}

export async function signIn(page, token) {
  await page.goto('/');
  await page.getByLabel('Bearer token').fill(token);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

export async function sessionCookie(context) {
  const c = (await context.cookies()).find((c) => c.name === 'apelora_session');
  return c;
}

// keystrokeToPaint presses key in the focused fleet search and returns the time from its
// keydown to the first frame after the count of matching rows ([data-fleet-count]) changed,
// or -1 when it did not change within 10 s. The listener is in place before the key is
// pressed (the evaluate returns once it is): on a loaded machine an evaluate still on its
// way would miss the keydown and wait for ever.
export async function keystrokeToPaint(page, key) {
  await page.evaluate(() => {
    window.__keystroke = new Promise((resolve) => {
      const count = document.querySelector('[data-fleet-count]');
      const before = count.getAttribute('data-fleet-count');
      let t0 = 0;
      const done = () => requestAnimationFrame(() => setTimeout(() => resolve(performance.now() - t0), 0));
      const obs = new MutationObserver(() => {
        if (count.getAttribute('data-fleet-count') !== before) {
          obs.disconnect();
          done();
        }
      });
      setTimeout(() => {
        obs.disconnect();
        resolve(-1);
      }, 10000);
      document.addEventListener('keydown', (ev) => {
        t0 = ev.timeStamp;
        obs.observe(count, { attributes: true });
      }, { once: true, capture: true });
    });
  });
  await page.keyboard.press(key);
  return page.evaluate(() => window.__keystroke);
}

// dialog is the open dialog.
export const dialog = (page) => page.locator('dialog[open]');

// humanPauseMs is how long the administrator reads a plan before confirming it: the
// console's suite confirms every change at that pace, so a plan whose hash moves with a
// clock (a join token's expiry) fails here as it fails for a person (PLAN_CHANGED).
export const humanPauseMs = 2000;

// confirmPlanned waits for the dialog's plan of the inputs as filled in (every confirm
// dialog asks for it first), reads it for humanPauseMs, then confirms. A plan that blocks
// the change fails here with the dialog's own reason, not later as a step that never came.
export async function confirmPlanned(page) {
  const c = dialog(page).locator('[data-confirm][data-planned]');
  await c.waitFor();
  const ready = dialog(page).locator('[data-confirm][data-planned]:not([aria-disabled="true"])');
  const blocked = async () => {
    const why = await dialog(page).innerText().catch(() => '(the dialog closed)');
    fail(`the confirm button stayed disabled after the plan came; the dialog says:\n${why}`);
  };
  try {
    await ready.waitFor({ timeout: 10000 });
  } catch {
    await blocked();
  }
  const shown = Date.now();
  await page.waitForTimeout(humanPauseMs);
  if (!(await ready.isVisible())) await blocked();
  expect(Date.now() - shown >= humanPauseMs, 'the plan was read for the human pause');
  await ready.click();
}

// confirmBulk confirms a bulk step's dialog once its plan for the set is shown and
// confirmable (the count typed, where asked), after the same human pause.
export async function confirmBulk(page) {
  const ready = dialog(page).locator('[data-bulk-confirm][data-planned]:not([aria-disabled="true"])');
  try {
    await ready.waitFor({ timeout: 60000 });
  } catch {
    const why = await dialog(page).innerText().catch(() => '(the dialog closed)');
    fail(`the bulk step stayed disabled after its plan came; the dialog says:\n${why}`);
  }
  await page.waitForTimeout(humanPauseMs);
  await ready.click();
}

// closedAfterConfirm waits until the confirmed dialog closes, or fails with what it says
// (the server's refusal: PLAN_CHANGED, UNAVAILABLE …) when it shows a problem instead.
export async function closedAfterConfirm(page, where, timeout = 60000) {
  const problem = dialog(page).locator('.problems');
  const gone = dialog(page).waitFor({ state: 'detached', timeout }).then(() => null);
  const said = problem.waitFor({ timeout }).then(async () => problem.innerText());
  const why = await Promise.race([gone, said]);
  if (why) fail(`${where}: the confirmation was refused: ${why}`);
}

// layoutProblems says what breaks the page's layout as it is: the document wider than the
// window (a value that does not wrap), content cut off inside a box that clips or scrolls
// sideways (a name or URL hidden), and an action button (a button, a link styled as one,
// a control with data-action) not wholly on screen or clipped by a box around it. Form
// fields scroll their own text and are left out, as are visually hidden texts.
export async function layoutProblems(page) {
  return page.evaluate(() => {
    const out = [];
    const doc = document.documentElement;
    const describe = (el) => {
      const id = el.id ? '#' + el.id : '';
      const cls = typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\s+/).join('.') : '';
      const text = (el.innerText || el.value || '').trim().replace(/\s+/g, ' ').slice(0, 60);
      return `<${el.tagName.toLowerCase()}${id}${cls}> "${text}"`;
    };
    if (doc.scrollWidth > doc.clientWidth) {
      // Name the innermost elements that reach past the window: what does not wrap.
      const past = [...document.querySelectorAll('body *')].filter((el) => el.getBoundingClientRect().right > doc.clientWidth + 0.5);
      const innermost = past.filter((el) => !past.some((o) => o !== el && el.contains(o))).slice(0, 3);
      out.push(`the page is ${doc.scrollWidth}px wide in a ${doc.clientWidth}px window (${innermost.map(describe).join(', ')})`);
    }
    const skip = (el) => el.closest('.visually-hidden, .reason-tip, input, select, textarea, option, script, style, [hidden]');
    const visible = (el) => {
      const r = el.getBoundingClientRect();
      return r.width > 1 && r.height > 1 && getComputedStyle(el).visibility !== 'hidden';
    };
    const clips = (el) => {
      const s = getComputedStyle(el);
      return s.overflowX !== 'visible' || s.overflowY !== 'visible';
    };
    // With a dialog open, what matters is in the dialog (the page behind is checked alone).
    const open = document.querySelector('dialog[open]');
    for (const el of (open ?? document.body).querySelectorAll('*')) {
      if (skip(el) || !visible(el) || !clips(el)) continue;
      if (el.scrollWidth > el.clientWidth + 1) out.push(`${describe(el)} cuts off ${el.scrollWidth - el.clientWidth}px of its content sideways`);
    }
    const vw = doc.clientWidth;
    for (const el of document.querySelectorAll('button, a.btn, [data-action], summary.btn')) {
      if (skip(el) || !visible(el)) continue;
      if (open && !open.contains(el)) continue;
      const r = el.getBoundingClientRect();
      if (r.left < 0 || r.right > vw + 0.5) out.push(`${describe(el)} is off screen (${Math.round(r.left)}–${Math.round(r.right)}px of ${vw}px)`);
      for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
        if (!clips(a)) continue;
        const b = a.getBoundingClientRect();
        if (r.left < b.left - 0.5 || r.right > b.right + 0.5) {
          out.push(`${describe(el)} is clipped by ${describe(a)}`);
          break;
        }
      }
    }
    return out;
  });
}

// layoutHolds fails with layoutProblems' findings, and keeps a screenshot of the page.
export async function layoutHolds(page, where) {
  const found = await layoutProblems(page);
  if (process.env.SHOTS) await shot(page, process.env.SHOTS, 'layout-' + where.replace(/[^a-z0-9]+/gi, '-'));
  expect(found.length === 0, `${where} at ${page.viewportSize().width}×${page.viewportSize().height}: ${found.slice(0, 12).join('; ')}`);
}
