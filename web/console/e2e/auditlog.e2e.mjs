// The audit page's checkpoint line and an event's proof (run by
// TestConsoleShowsTheCheckpointAndProvesAnEvent): "verified up to checkpoint N at T" from
// auditCheckpoint, and the inclusion proof of an event on request, checked in the browser
// against the signed root.
import { axe, clean, expect, launch, log, newPage, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, SHOTS, EVENTS } = process.env;

const browser = await launch();
try {
  const { page } = await newPage(browser, BASE);
  await signIn(page, ADMIN_TOKEN);
  await page.goto('/audit');

  log('step: the checkpoint line names the latest checkpoint');
  const line = page.locator(`.checkpoint[data-checkpoint="${EVENTS}"]`);
  await line.waitFor({ timeout: 30000 });
  const text = await line.innerText();
  expect(text.includes(`Verified up to checkpoint ${EVENTS} at`), `checkpoint line: ${text}`);

  log('step: an event proved on request, checked in the browser');
  const row = page.locator('tr[data-audit-action="registerMachine"]').last();
  await row.getByRole('button', { name: 'Proof' }).click();
  const proof = row.locator('[data-proof-result]');
  await proof.waitFor();
  const result = await proof.getAttribute('data-proof-result');
  const summary = await proof.locator('summary').innerText();
  expect(result === 'checked', `proof result ${result}: ${summary}`);
  expect(summary.includes(`of checkpoint ${EVENTS}`) && summary.includes('checked in this browser'), `proof: ${summary}`);
  expect((await proof.locator('.proof-hashes li').count()) > 0, 'the proof lists its hashes');
  await shot(page, SHOTS, '01-audit-proof');
  await axe(page, 'audit with a proof');
  await clean(page, 'audit');
} finally {
  await browser.close();
}
