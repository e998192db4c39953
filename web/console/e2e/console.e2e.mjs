// The console end to end, as an administrator uses it (run by TestConsoleEndToEnd).
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { axe, clean, expect, launch, log, newPage, noStoredCredential, sessionCookie, shot, signIn } from './lib.mjs';

const { BASE, ADMIN_TOKEN, VIEWER_TOKEN, CONTROL, SHOTS, HOST_ADDRESS, HOST_ENV } = process.env;
const control = async (path, body) => {
  const r = await fetch(CONTROL + path, { method: 'POST', body: body ? JSON.stringify(body) : undefined });
  expect(r.ok, `control ${path}: ${r.status} ${await r.text()}`);
};
const dialog = (page) => page.locator('dialog[open]');
const phaseIs = (page, phase, timeout = 30000) => page.locator(`.title-row [data-phase="${phase}"]`).waitFor({ timeout });
const step = (s) => log('step:', s);

function run(cmd, env, stdin) {
  return new Promise((resolve, reject) => {
    const p = spawn('sh', ['-c', cmd], { cwd: mkdtempSync(join(tmpdir(), 'enrol-')), env: { ...process.env, ...env } });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}: ${out}`))));
    p.stdin.end(stdin);
  });
}

const browser = await launch();
try {
  const { context, page } = await newPage(browser, BASE);

  step('sign-in page');
  await page.goto('/');
  await page.getByLabel('Bearer token').waitFor();
  await shot(page, SHOTS, '01-sign-in');
  await axe(page, 'sign-in');
  await page.getByLabel('Bearer token').fill('apl_not-a-real-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('.field-error').waitFor();
  expect(/not valid/.test(await page.locator('.field-error').innerText()), 'a bad token is refused beside its field');
  await shot(page, SHOTS, '02-sign-in-refused');
  await signIn(page, ADMIN_TOKEN);
  const adminCookie = await sessionCookie(context);
  expect(adminCookie && adminCookie.httpOnly && adminCookie.sameSite === 'Strict' && adminCookie.path === '/', `session cookie attributes: ${JSON.stringify(adminCookie)}`);
  await control('/secrets', [adminCookie.value]);
  await noStoredCredential(page, 'after sign-in');

  step('fleet: MAAS machines, records and members');
  await page.locator('tr[data-machine="node-a"][data-phase="DISCOVERED"]').waitFor();
  await page.locator('tr[data-machine="m1"][data-phase="UNREGISTERED"]').waitFor();
  await page.locator('tr[data-machine="node-new"][data-phase="DISCOVERED"]').waitFor();
  expect((await page.locator('tr[data-machine="m1"]').innerText()).includes('Deployed'), 'm1 shows its MAAS status beside the member');
  await shot(page, SHOTS, '03-fleet');
  await axe(page, 'fleet');
  await page.locator('[data-fleet-search]').fill('nnnn03');
  await page.waitForFunction(() => document.querySelectorAll('tbody tr[data-machine]').length === 1);
  expect(page.url().includes('q=nnnn03'), 'the search is kept in the URL: ' + page.url());
  await page.reload();
  await page.locator('tr[data-machine="node-new"]').waitFor();
  expect((await page.locator('tbody tr[data-machine]').count()) === 1, 'the filter survives a reload');
  await page.getByRole('button', { name: 'Clear filters' }).click();
  await clean(page, 'fleet');

  step('register a discovered machine');
  await page.locator('tr[data-machine="node-a"] [data-action="register"]').click();
  await dialog(page).waitFor();
  expect((await dialog(page).innerText()).includes('aaaa01'), 'the register dialog names the system id');
  await dialog(page).locator('[data-confirm]').click();
  await page.waitForURL('**/machines/node-a');
  await phaseIs(page, 'REGISTERED');
  await shot(page, SHOTS, '04-machine-registered');
  await axe(page, 'machine');

  step('MAAS steps: release shows what happens to the disks; hardware tests need the hostname');
  await page.locator('[data-action="release"]').click();
  await page.locator('[data-erase-preview]').waitFor();
  expect((await page.locator('[data-erase-preview]').innerText()).includes('will not be erased'), 'release preview');
  await shot(page, SHOTS, '05-release-dialog');
  await axe(page, 'release dialog');
  await dialog(page).getByRole('button', { name: 'Cancel' }).click();
  await page.locator('[data-action="test"]').click();
  await dialog(page).getByLabel(/Hostname/).fill('node-b');
  await dialog(page).locator('[data-confirm]').click();
  await dialog(page).locator('.field-error').waitFor();
  expect((await dialog(page).locator('.field-error').innerText()).includes('not the hostname'), 'the server\'s field error is shown beside the hostname');
  await shot(page, SHOTS, '06-field-error');
  await dialog(page).getByRole('button', { name: 'Cancel' }).click();
  await clean(page, 'MAAS steps');

  step('register a manual machine; a bad name is refused beside its field');
  await page.goto('/');
  await page.getByRole('button', { name: 'Register a machine' }).click();
  await dialog(page).getByLabel('Name').fill('Bad_Name');
  await dialog(page).locator('[data-confirm]').click();
  await dialog(page).locator('.field-error').waitFor();
  await dialog(page).getByLabel('Name').fill('node-4');
  await dialog(page).locator('[data-confirm]').click();
  await page.waitForURL('**/machines/node-4');
  await phaseIs(page, 'REGISTERED');

  step('approve: the join token, once');
  await page.locator('[data-action="approve"]').click();
  await dialog(page).locator('[data-confirm]').click();
  const tokenBox = page.locator('[data-join-token]');
  await tokenBox.waitFor();
  const token = await tokenBox.inputValue();
  const command = await page.locator('[data-command]').innerText();
  expect(token.length > 20 && command.includes('--name node-4') && command.includes('ADDRESS'), `token dialog: ${command}`);
  expect((await dialog(page).innerText()).includes('will not be shown again'), 'the dialog warns the token will not be shown again');
  await control('/secrets', [token]);
  await shot(page, SHOTS, '07-join-token');
  await axe(page, 'token dialog');
  await dialog(page).getByRole('button', { name: /I have copied it/ }).click();
  await phaseIs(page, 'AWAITING_JOIN');
  expect(!(await page.content()).includes(token), 'the token is gone from the page once the dialog closes');
  await noStoredCredential(page, 'after approval');

  step('run the shown command on a fresh incusd; HELD arrives without reload');
  const out = await run(command.replace('ADDRESS:8443', HOST_ADDRESS), JSON.parse(HOST_ENV), token + '\n');
  expect(!out.includes(token), 'enrol-member.sh printed the token');
  await control('/joined');
  await phaseIs(page, 'HELD', 45000);

  step('admission checks stream in from a report run elsewhere');
  await page.locator('#admission-title').waitFor();
  // Opening a held member runs its checks once; a run started elsewhere then streams in too.
  await page.locator('[data-verdict="ADMISSIBLE"]').waitFor({ timeout: 20000 });
  const firstRun = await page.locator('[data-verdict]').getAttribute('data-run');
  await control('/report');
  await page.locator(`[data-verdict="ADMISSIBLE"]:not([data-run="${firstRun}"])`).waitFor({ timeout: 20000 });
  // Every check of the run is shown: 11 today (online … clock, and the two hardware-profile
  // checks, shown as SKIPPED for a machine without a profile).
  const checks = await page.locator('tr[data-check]').count();
  expect(checks === 11, `${checks} checks shown, want 11`);
  const admit = page.locator('[data-action="admit"]');
  expect((await admit.getAttribute('aria-disabled')) === null, 'Admit is enabled once admissible');
  await shot(page, SHOTS, '08-machine-held-checks');
  await axe(page, 'machine held');

  step('admit');
  await admit.click();
  expect((await dialog(page).innerText()).includes('node-4'), 'the confirmation names the machine');
  await dialog(page).locator('[data-confirm]').click();
  await phaseIs(page, 'ADMITTED');
  await clean(page, 'enrolment flow');

  step('the fleet after the enrolment');
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Fleet' }).click();
  await page.locator('tr[data-machine="node-4"][data-phase="ADMITTED"]').waitFor();
  await page.locator('tr[data-machine="node-a"][data-phase="REGISTERED"]').waitFor();
  await shot(page, SHOTS, '09a-fleet-after');

  step('audit shows each step');
  await page.getByRole('link', { name: 'Audit' }).click();
  for (const a of ['registerMachine', 'approveEnrolment', 'admitMember']) {
    await page.locator(`tr[data-audit-action="${a}"][data-outcome="SUCCEEDED"]`).first().waitFor();
  }
  await shot(page, SHOTS, '09-audit');
  await axe(page, 'audit');
  await page.getByLabel('Outcome').selectOption('FAILED');
  await page.waitForFunction(() => [...document.querySelectorAll('tr[data-outcome]')].every((r) => r.dataset.outcome === 'FAILED') && document.querySelectorAll('tr[data-outcome]').length > 0);
  expect(page.url().includes('outcome=FAILED'), 'the audit filter is kept in the URL');
  await page.getByLabel('Outcome').selectOption('');
  await page.getByLabel('Actor').fill('nobody');
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.getByText('No audited action yet.').waitFor();
  await clean(page, 'audit');

  step('enrolment and fencing pages; a mapping offered from MAAS');
  await page.getByRole('link', { name: 'Enrolment' }).click();
  await page.locator('[data-stage="ADMITTED"] tr[data-machine="node-4"]').waitFor();
  await shot(page, SHOTS, '10-enrolment');
  await axe(page, 'enrolment');
  await page.getByRole('link', { name: 'Fencing' }).click();
  await page.locator('tr[data-member="m1"] [data-action="set-mapping"]').click();
  await dialog(page).getByLabel('MAAS machine').selectOption('mmmm01');
  expect((await dialog(page).getByLabel('Hardware UUID').inputValue()).length === 36, 'the hardware UUID is offered from MAAS');
  await dialog(page).locator('[data-confirm]').click();
  await page.getByText('Mapping set').waitFor();
  await page.locator('tr[data-member="m1"]', { hasText: 'mmmm01' }).waitFor();
  await shot(page, SHOTS, '11-fencing');
  await axe(page, 'fencing');
  await clean(page, 'fencing');

  step('removal needs the typed name');
  await page.goto('/machines/node-4');
  await phaseIs(page, 'ADMITTED');
  await page.locator('[data-action="remove"]').click();
  const confirm = dialog(page).locator('[data-confirm]');
  expect((await confirm.getAttribute('aria-disabled')) === 'true', 'Remove is disabled before the name is typed');
  await confirm.click({ force: true });
  expect(await dialog(page).isVisible(), 'pressing Remove before typing the name does nothing');
  await dialog(page).getByLabel(/Type the member's name/).fill('node-x');
  expect((await confirm.getAttribute('aria-disabled')) === 'true', 'Remove stays disabled for another name');
  await shot(page, SHOTS, '12-remove-dialog');
  await dialog(page).getByLabel(/Type the member's name/).fill('node-4');
  await confirm.click();
  await phaseIs(page, 'REGISTERED', 60000);

  step('a viewer sees every action disabled, with the reason');
  const v = await newPage(browser, BASE);
  await signIn(v.page, VIEWER_TOKEN);
  await control('/secrets', [(await sessionCookie(v.context)).value]);
  const reg = v.page.locator('tr[data-machine="node-new"] [data-action="register"]');
  await reg.waitFor();
  expect((await reg.getAttribute('aria-disabled')) === 'true', 'Register is disabled for a viewer');
  await v.page.getByText('View only', { exact: true }).waitFor();
  await shot(v.page, SHOTS, '15-viewer-fleet');
  await v.page.goto('/machines/node-4');
  await phaseIs(v.page, 'REGISTERED');
  const buttons = v.page.locator('.actions button');
  const n = await buttons.count();
  expect(n >= 2, `viewer sees ${n} actions`);
  for (let i = 0; i < n; i++) {
    expect((await buttons.nth(i).getAttribute('aria-disabled')) === 'true', `viewer action ${await buttons.nth(i).innerText()} is enabled`);
    const reason = await buttons.nth(i).getAttribute('aria-describedby');
    expect(reason && (await v.page.locator(`[id="${reason}"]`).innerText()).includes('manage-infrastructure'), 'each disabled action says why');
  }
  await shot(v.page, SHOTS, '16-viewer-machine');
  await axe(v.page, 'viewer machine');
  await v.page.goto('/fencing');
  await v.page.locator('tr[data-member="m1"]').waitFor();
  await shot(v.page, SHOTS, '17-viewer-fencing');
  await noStoredCredential(v.page, 'viewer');
  await clean(v.page, 'viewer');

  step('a revoked identity is sent back to sign-in, with the reason');
  await control('/revoke-viewer');
  await v.page.getByText(/"viewer" was revoked/).waitFor({ timeout: 20000 });
  await shot(v.page, SHOTS, '18-viewer-revoked');
  step('MAAS stops: the fleet says so');
  await control('/stop-maas');
  await page.goto('/');
  await page.getByText('MAAS cannot be asked').waitFor({ timeout: 30000 });
  await shot(page, SHOTS, '13-maas-banner');
  await axe(page, 'fleet without MAAS');

  step('an expired session returns to sign-in with the reason');
  await control('/expire-sessions');
  await page.getByText(/session expired/).waitFor({ timeout: 20000 });
  await shot(page, SHOTS, '14-session-expired');

  step('sign out ends the session on the server');
  await signIn(page, ADMIN_TOKEN);
  const second = await sessionCookie(context);
  await control('/secrets', [second.value]);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByText('You signed out.').waitFor();
  const after = await fetch(BASE + '/api/v1/session', { headers: { Cookie: `apelora_session=${second.value}` } });
  expect(after.status === 401, `the signed-out session still answers ${after.status}`);
  const gql = await fetch(BASE + '/graphql', {
    method: 'POST',
    headers: { Cookie: `apelora_session=${second.value}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ query: '{ viewer { name } }' }),
  });
  const body = await gql.json();
  expect(body.errors?.[0]?.extensions?.code === 'UNAUTHENTICATED', 'a signed-out session cannot read: ' + JSON.stringify(body));
  await noStoredCredential(page, 'after sign-out');
  await clean(page, 'sessions');

  log('console end to end: all steps passed');
} finally {
  await browser.close();
}
