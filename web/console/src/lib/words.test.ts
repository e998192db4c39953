import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buttonNames, inConsoleWords, timeText } from './words';
import { changes } from '../api/changes.gen';

// The messages the server writes today (their Go sources in the comments): the console
// shows its buttons' names and its one time format in them.
test('the server\'s words become the console\'s: buttons named, not mutations; one time format', () => {
  // provisioning/steps.go
  assert.equal(
    inConsoleWords('MAAS machine s1 has no machine record in Apelora: register it first (registerMachine with provisioner MAAS and this system id; a machine registers in any MAAS state), so that every step is in its history'),
    'MAAS machine s1 has no machine record in Apelora: register it first (“Register” on its row; a machine registers in any MAAS state), so that every step is in its history',
  );
  // provisioning/service.go
  assert.equal(inConsoleWords('register it from MAAS first (registerMachine with provisioner MAAS)'), 'register it from MAAS first (“Register”)');
  // placement/placement.go
  assert.equal(
    inConsoleWords('the placement guard is on, but no member carries the admission mark (user.apelora.admission) yet: Incus refuses every untargeted placement until admitMember admits a member'),
    'the placement guard is on, but no member carries the admission mark (user.apelora.admission) yet: Incus refuses every untargeted placement until a member is admitted (“Admit”)',
  );
  assert.match(inConsoleWords('the placement guard is off: …; turn it on with setPlacementGuard (apeloractl placement-guard on)'), /turn it on with the placement guard switch of its cluster on the Clusters page$/);
  // maintenance/maintenance.go, lifecycle.go
  assert.equal(inConsoleWords('"n1" is already evacuated: restore it (restoreMember) when its maintenance is done'), '"n1" is already evacuated: restore it (“Restore”) when its maintenance is done');
  assert.match(inConsoleWords('run the admission checks, then admitMember'), /then “Admit”$/);
  // No mutation name is left in any of them.
  for (const m of Object.keys(changes)) assert.ok(!inConsoleWords(`x (${m}) y`).includes(m), m);
  // Times: the fleet's MAAS notice (fleet/fleet.go) and drift's (RFC 3339, UTC).
  const at = '2026-12-06T04:27:35Z';
  assert.equal(inConsoleWords(`MAAS not answering (since ${at}): machine state from MAAS is missing (x)`), `MAAS not answering (since ${timeText(at)}): machine state from MAAS is missing (x)`);
  assert.match(timeText(at), /^\d{1,2} Dec 2026, \d{2}:\d{2}:\d{2}$/);
  assert.ok(!/\d{4}-\d{2}-\d{2}T/.test(inConsoleWords(`drift since 2026-12-06T04:27:35.123456Z: x`)));
  // Words that only look like them are left alone.
  assert.equal(inConsoleWords('admitMembers and registerMachineX'), 'admitMembers and registerMachineX');
});

test('every change has its button\'s name', () => {
  for (const m of Object.keys(changes)) assert.ok(buttonNames[m as keyof typeof buttonNames], m);
});
