// The fleet before MAAS answers (run by TestConsoleFleetBeforeMAAS): MAAS holds every
// request, yet the fleet page shows the Incus member and the records at once, with the
// notice "MAAS not answering (since T)"; when MAAS answers, its machines fill in on the
// same page. Then filter keystrokes at 300 machines are timed to the next paint while
// changes stream in (a figure, not a pass/fail).
import { axe, clean, confirmBulk, expect, keystrokeToPaint, launch, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, SHOTS, CONTROL, MEMBER } = process.env;

async function control(path) {
  const r = await fetch(CONTROL + path, { method: 'POST' });
  expect(r.ok, `control ${path}: ${r.status} ${await r.text()}`);
}

// keystrokes types 1, 2, 3 (narrowing "node-" to 100, 10, 1 rows) and three Backspaces
// (back to the 300 named node-…; node-007 is MAAS's machine and its record in one row),
// rounds times, and returns each keystroke's time from keydown to the first frame after
// the count of matching rows changed.
async function keystrokes(page, rounds) {
  const times = [];
  for (let round = 0; round < rounds; round++) {
    for (const key of ['1', '2', '3', 'Backspace', 'Backspace', 'Backspace']) {
      await page.waitForTimeout(120);
      let t = await keystrokeToPaint(page, key);
      if (t < 0) t = 10000; // not painted within 10 s: counted as 10 s (and said), not a hang
      log(`keystroke ${key}: ${t.toFixed(1)} ms${t >= 10000 ? ' (not painted within 10 s)' : ''}`);
      times.push(t);
    }
  }
  const shown = Number(await page.locator('[data-fleet-count]').getAttribute('data-fleet-count'));
  expect(shown === 300, `after the Backspaces all 300 rows should show again, not ${shown}`);
  return times.sort((a, b) => a - b);
}

function report(what, times, changes) {
  const p = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(1);
  log(`figure: fleet filter keystroke to paint at 300 machines ${what}, in Chromium: median ${p(0.5)} ms, p90 ${p(0.9)} ms, max ${times[times.length - 1].toFixed(1)} ms (${times.length} keystrokes; ${changes} cell changes streamed in meanwhile)`);
}

const browser = await launch();
try {
  log('step: the fleet while MAAS holds every request');
  const { page } = await newPage(browser, BASE);
  const t0 = Date.now();
  await signIn(page, ADMIN_TOKEN);
  await page.locator(`tr[data-machine="${MEMBER}"]`).waitFor({ timeout: 30000 });
  log(`figure: fleet page with MAAS held: the Incus member and the records shown ${Date.now() - t0} ms after sign-in began`);
  await page.locator('tr[data-machine="rack-7"][data-phase="REGISTERED"]').waitFor();
  const notice = page.locator('[data-source="maas"]');
  await notice.waitFor();
  const text = await notice.textContent();
  expect(/^MAAS not answering \(since .+\): machine state from MAAS is missing/.test(text), `the MAAS notice says ${JSON.stringify(text)}`);
  expect(!!(await notice.getAttribute('data-since')), 'the MAAS notice carries no since');
  // The record registered from MAAS says its MAAS columns are unknown, not empty.
  await page.locator('tr[data-machine="node-007"] [data-maas-missing]').first().waitFor();
  expect((await page.locator('tr[data-machine="node-100"]').count()) === 0, 'a machine only MAAS knows shows before MAAS answered');
  await shot(page, SHOTS, 'fleet-maas-not-answering', false);
  await axe(page, 'fleet with MAAS not answering');

  log('step: MAAS answers; its machines fill in without a reload');
  await page.evaluate(() => {
    window.__sameDocument = true;
  });
  await control('/release-maas');
  await page.waitForFunction(() => Number(document.querySelector('[data-fleet-count]')?.getAttribute('data-fleet-count')) >= 300, null, { timeout: 60000 });
  await page.locator('[data-source="maas"]').waitFor({ state: 'detached', timeout: 30000 });
  await page.locator('tr[data-machine="node-007"] [data-maas-missing]').first().waitFor({ state: 'detached' });
  expect(await page.evaluate(() => window.__sameDocument === true), 'the page reloaded to fill MAAS in');
  await shot(page, SHOTS, 'fleet-maas-filled-in', false);

  log('step: filter keystrokes at 300 machines, still, then while changes stream in');
  const search = page.locator('[data-fleet-search]');
  await search.focus();
  await search.fill('node-');
  await page.locator('[data-fleet-count="300"]').waitFor();
  // Rows the stream changed while typing: proof that changes did (or did not) stream in.
  await page.evaluate(() => {
    window.__rowChanges = 0;
    new MutationObserver((ms) => {
      window.__rowChanges += ms.length;
    }).observe(document.querySelector('.fleet-table tbody'), { subtree: true, childList: false, characterData: true });
  });
  const still = await keystrokes(page, 3);
  const quiet = await page.evaluate(() => window.__rowChanges);
  report('still', still, quiet);
  await control('/stream');
  await page.waitForTimeout(1500);
  await page.evaluate(() => {
    window.__rowChanges = 0;
  });
  const streaming = await keystrokes(page, 4);
  const changes = await page.evaluate(() => window.__rowChanges);
  expect(changes > 0, 'no row changed while typing: nothing streamed in');
  report('while changes stream in', streaming, changes);
  await shot(page, SHOTS, 'fleet-streaming-filtered', false);

  log('step: a bulk step sends each machine the hash of the plan it was shown');
  await search.fill('node-29');
  await page.locator('[data-fleet-count="10"]').waitFor();
  await page.locator('[data-select-all]').click();
  await page.locator('[data-bulk-bar="10"]').waitFor();
  await page.locator('[data-bulk-step]').selectOption('register');
  await page.locator('[data-bulk-open]').click();
  const bulk = page.locator('[data-bulk-dialog]');
  await bulk.locator('[data-bulk-plan="10"]').waitFor({ timeout: 60000 });
  await bulk.locator('[data-bulk-plans] summary').click();
  await bulk.locator('[data-bulk-machine-plan="node-290"]').waitFor();
  const hashed = await bulk.locator('[data-bulk-machine-plan][data-plan-hash]').count();
  expect(hashed === 10, `${hashed} of the 10 machines' plans carry a hash`);
  const line = await bulk.locator('[data-bulk-machine-plan="node-290"]').innerText();
  expect(line.includes('node-290:') && line.length > 'node-290: '.length, `node-290's plan reads ${JSON.stringify(line)}`);
  await shot(page, SHOTS, 'bulk-machine-plans');
  await axe(page, 'bulk plans');
  await confirmBulk(page);
  await bulk.locator('[data-bulk-counts="finished"]').waitFor({ timeout: 90000 });
  const done = await bulk.locator('[data-outcome="done"]').count();
  expect(done === 10, `${done} of 10 registered: ${await bulk.innerText()}`);
  await clean(page, 'fleet before MAAS');
} finally {
  await browser.close();
}
