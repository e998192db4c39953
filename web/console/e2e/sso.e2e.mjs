// Single sign-on from the console (run by TestConsoleSingleSignOn): Sign in with SSO goes
// to the real OpenID provider and back, lands on the fleet with the permissions of the
// user's groups (a viewer group sees changes disabled), a user in no mapped group gets a
// page naming the groups that grant access, and revoking the identity ends its session.
import { clean, expect, launch, log, newPage, noStoredCredential, shot, signIn } from './lib.mjs';

const { BASE, IDP, CONTROL, SHOTS, ADMIN_TOKEN } = process.env;
const control = async (path) => {
  const r = await fetch(CONTROL + path, { method: 'POST' });
  expect(r.ok, `control ${path}: ${r.status} ${await r.text()}`);
};

// ssoPage is a page whose visits to the provider (another origin, by design) and the
// refusal page's expected 403 are not problems.
const ssoPage = async (browser) => {
  const p = await newPage(browser, BASE);
  p.expected = (s) => s.includes(IDP) || s.includes('/api/v1/session/sso/callback');
  return p;
};
const checkClean = async (p, where) => {
  p.page.problems = p.page.problems.filter((s) => !p.expected(s));
  await clean(p.page, where);
};

const signInSSO = async (page, user) => {
  await control('/sign-in-as/' + user);
  await page.goto('/');
  await page.getByRole('button', { name: 'Sign in with SSO' }).click();
};

const browser = await launch();
try {
  log('step: a viewer group signs in and sees changes disabled');
  const v = await ssoPage(browser);
  await signInSSO(v.page, 'victor');
  await v.page.getByRole('navigation', { name: 'Main' }).waitFor();
  await v.page.getByText('View only', { exact: true }).waitFor();
  await shot(v.page, SHOTS, '01-viewer-fleet');
  await v.page.goto('/identities');
  const create = v.page.locator('[data-action="create-identity"]');
  await create.waitFor();
  expect((await create.getAttribute('aria-disabled')) === 'true', 'Create identity is disabled for a viewer group');
  await noStoredCredential(v.page, 'viewer signed in with SSO');
  await checkClean(v, 'viewer');

  log('step: an admin group signs in with changes enabled, and is revoked');
  const a = await ssoPage(browser);
  await signInSSO(a.page, 'alice');
  await a.page.getByRole('navigation', { name: 'Main' }).waitFor();
  await a.page.goto('/identities');
  await a.page.locator('tr[data-identity="alice"] [data-sso-subject="sub-alice"]').waitFor();
  const create2 = a.page.locator('[data-action="create-identity"]');
  expect((await create2.getAttribute('aria-disabled')) === null, 'Create identity is enabled for the admin group');
  await shot(a.page, SHOTS, '02-admin-identities');
  await noStoredCredential(a.page, 'admin signed in with SSO');
  await checkClean(a, 'admin');
  await control('/revoke/alice');
  await a.page.getByText(/"alice" was revoked/).waitFor({ timeout: 20000 });
  await a.page.getByRole('button', { name: 'Sign in with SSO' }).waitFor();
  await shot(a.page, SHOTS, '03-revoked');

  log('step: a user in no mapped group is told which groups grant access');
  const n = await ssoPage(browser);
  await signInSSO(n.page, 'nadia');
  await n.page.getByRole('heading', { name: 'No access to Apelora' }).waitFor();
  const msg = await n.page.locator('#sso-message').innerText();
  expect(msg.includes('ops-admins, ops-viewers'), 'the refusal names the groups that grant access: ' + msg);
  await shot(n.page, SHOTS, '04-no-group');
  await checkClean(n, 'no group');

  log('step: the issuer is down: the sign-in page says so, and the bearer token still works');
  await control('/stop-idp');
  const d = await newPage(browser, BASE);
  await d.page.goto('/');
  await d.page.getByRole('button', { name: 'Sign in with SSO' }).click();
  const down = await d.page.getByRole('alert').innerText();
  expect(down.includes('does not answer') && down.includes('bearer token'), 'the issuer being down is said: ' + down);
  await shot(d.page, SHOTS, '05-issuer-down');
  d.page.problems = d.page.problems.filter((p) => !p.includes('HTTP 503 for POST') || !p.includes('/api/v1/session/sso'));
  await signIn(d.page, ADMIN_TOKEN);
  await clean(d.page, 'issuer down');
} finally {
  await browser.close();
}
