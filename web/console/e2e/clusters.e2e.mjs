// The clusters page (run by TestConsoleRegistersACluster): the cluster of APELORA_INCUS_*
// listed with its member; a second real lab registered through the dialog, whose plan
// shows the fingerprint it pins and the members with their roles; a cluster that does not
// trust Apelora refused in the plan with the command to run; the second removed again;
// the first not removable while a machine record names it; each cluster's placement guard
// switch on its row acts in that cluster alone; with two, the approve dialog's cluster
// chooser offers both and the plan names the one chosen. axe in both themes.
import { axe, clean, closedAfterConfirm, confirmPlanned, dialog, expect, launch, layoutHolds, log, newPage, noStoredCredential, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, SHOTS, RACK2_URL, RACK2_CERT, RACK2_FINGERPRINT, RACK3_URL, RACK3_CERT } = process.env;

const browser = await launch();
try {
  const { page } = await newPage(browser, BASE);
  await signIn(page, ADMIN_TOKEN);

  log('step: the cluster of APELORA_INCUS_* with its member');
  await page.goto('/clusters');
  const def = page.locator('tr[data-cluster="default"]');
  await def.locator('[data-member="m1"]').waitFor({ timeout: 30000 });
  const defText = await def.innerText();
  expect(defText.includes('from APELORA_INCUS_*') && defText.includes('answers') && (await def.locator('[data-guard="OFF"]').count()) === 1, 'default: ' + defText);
  // No apelora-worker runs here: fencing is paused in the cluster, and the page says why.
  const fencing = await def.locator('[data-fencing]').innerText();
  expect((await def.locator('[data-fencing]').getAttribute('data-fencing')) === 'paused' && fencing.includes('NO_FENCE_WORKER'), 'default fencing: ' + fencing);
  const remove = def.locator('[data-action="remove-cluster"]');
  expect((await remove.getAttribute('aria-disabled')) === 'true', 'default cannot be removed while a machine record names it');
  await layoutHolds(page, 'clusters page');
  await axe(page, 'clusters page');

  log('step: register rack2: the plan shows the fingerprint and the members with their roles');
  await page.locator('[data-action="register-cluster"]').click();
  await dialog(page).getByLabel('Name').fill('rack2');
  await dialog(page).getByLabel('A member’s URL').fill(RACK2_URL);
  await dialog(page).getByLabel('Cluster certificate (PEM)').fill(RACK2_CERT);
  await dialog(page).locator('[data-plan-fact]', { hasText: RACK2_FINGERPRINT }).waitFor({ timeout: 30000 });
  const facts = await dialog(page).locator('.plan-facts').innerText();
  expect(facts.includes('member m1') && facts.includes('member m2') && facts.includes('database'), 'the plan names the members and roles: ' + facts);
  await shot(page, SHOTS, '01-register-cluster-plan');
  await axe(page, 'register-cluster dialog');
  await confirmPlanned(page);
  await closedAfterConfirm(page, 'register rack2');
  const rack2 = page.locator('tr[data-cluster="rack2"]');
  await rack2.locator('[data-member="m2"]').waitFor({ timeout: 30000 });
  expect((await page.locator('.banner.tone-positive').innerText()).includes('Cluster rack2 registered'), 'the notice says rack2 was registered');
  await shot(page, SHOTS, '02-clusters');
  await layoutHolds(page, 'clusters page with two');

  log('step: each cluster has its own placement guard: rack2\'s switch turns rack2\'s on, default\'s stays off');
  await rack2.locator('[data-action="placement-guard"]').click();
  await dialog(page).getByText('PATCH /1.0').waitFor({ timeout: 30000 });
  await confirmPlanned(page);
  await rack2.locator('[data-guard="ON"]').waitFor({ timeout: 30000 });
  expect((await rack2.locator('[data-action="placement-guard"]').getAttribute('aria-checked')) === 'true', 'rack2\'s switch says on');
  expect((await def.locator('[data-guard="OFF"]').count()) === 1, 'default\'s guard stays off');

  log('step: the rolling reboots page has a part per cluster, each with its own start');
  await page.goto('/rolling');
  for (const c of ['default', 'rack2']) {
    const part = page.locator(`section[data-cluster="${c}"]`);
    await part.getByText('No rolling reboot yet.').waitFor({ timeout: 30000 });
    expect((await part.getByRole('button', { name: 'Start a rolling reboot' }).count()) === 1, `a start button for ${c}`);
  }
  await axe(page, 'rolling reboots page with two clusters');
  await page.goto('/clusters');

  log('step: with two clusters, approve offers them, starting on the machine\'s cluster; the plan names the one chosen');
  await page.goto('/machines/node-7');
  await page.locator('.actions [data-action="approve"]').click();
  const chooser = dialog(page).getByLabel('Cluster', { exact: true });
  await chooser.locator('option[value="rack2"]').waitFor({ state: 'attached', timeout: 30000 });
  // node-7's record names no cluster: the cluster of APELORA_INCUS_* is chosen.
  expect((await chooser.inputValue()) === 'default', 'the chooser starts on the machine\'s cluster: ' + (await chooser.inputValue()));
  await dialog(page).locator('[data-plan-fact]', { hasText: 'cluster of node-7' }).waitFor({ timeout: 30000 });
  await chooser.selectOption('rack2');
  const fact = dialog(page).locator('[data-plan-fact]', { hasText: 'cluster of node-7' }).filter({ hasText: 'rack2' });
  await fact.waitFor({ timeout: 30000 });
  await shot(page, SHOTS, '02b-approve-cluster-chooser');
  await axe(page, 'approve dialog with the cluster chooser');
  await dialog(page).getByRole('button', { name: 'Cancel' }).click();
  await dialog(page).waitFor({ state: 'detached' });
  await page.goto('/clusters');

  log('step: a cluster that does not trust Apelora: the plan says what to run');
  await page.locator('[data-action="register-cluster"]').click();
  await dialog(page).getByLabel('Name').fill('rack3');
  await dialog(page).getByLabel('A member’s URL').fill(RACK3_URL);
  await dialog(page).getByLabel('Cluster certificate (PEM)').fill(RACK3_CERT);
  const refusal = dialog(page).locator('[data-plan-refusal]');
  await refusal.waitFor({ timeout: 30000 });
  expect((await refusal.innerText()).includes('incus config trust add-certificate'), 'the refusal gives the command: ' + (await refusal.innerText()));
  expect((await dialog(page).locator('[data-confirm]').getAttribute('aria-disabled')) === 'true', 'a refused plan cannot be confirmed');
  await shot(page, SHOTS, '03-register-cluster-untrusted');
  await dialog(page).getByRole('button', { name: 'Cancel' }).click();
  await dialog(page).waitFor({ state: 'detached' });

  log('step: remove rack2');
  await rack2.locator('[data-action="remove-cluster"]').click();
  await dialog(page).getByLabel('Type rack2 to confirm').fill('rack2');
  await confirmPlanned(page);
  await closedAfterConfirm(page, 'remove rack2');
  await rack2.waitFor({ state: 'detached', timeout: 30000 });
  expect((await page.locator('tr[data-cluster]').count()) === 1, 'only default is left');
  await noStoredCredential(page, 'clusters');
  await clean(page, 'clusters');
} finally {
  await browser.close();
}
