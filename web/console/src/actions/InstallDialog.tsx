// Install an operating system through MAAS and enrol the machine (installOperatingSystem):
// the images MAAS holds for its architecture, and the member configuration it joins with.
import { useState } from 'react';
import { useMutation } from 'urql';
import { InstallOperatingSystemMutation } from '../api/maas';
import { useMaasImages } from '../hooks/maas';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { Field, Loading } from '../components/ui';
import { MemberConfigRows, useMemberConfig } from '../components/MemberConfigRows';
import { ClusterChooser, useClusterChooser } from '../components/ClusterChooser';
import { defaultImage, offeredImages } from '../lib/maas';
import { problemsOf } from '../lib/errors';
import type { Row } from '../lib/fleet';

export function InstallDialog({ row, onClose }: { row: Row; onClose(): void }) {
  const [, install] = useMutation(InstallOperatingSystemMutation);
  const [series, setSeries] = useState('');
  const config = useMemberConfig();
  const [picked, setPicked] = useState('');
  const chooser = useClusterChooser(row.cluster?.name, picked);
  const m = row.maas!;
  // The images MAAS holds, when it lets Apelora's key list them; else the series is typed.
  const images = useMaasImages();
  const offered = offeredImages(images.data?.maasImages ?? [], m.architecture);
  const listed = offered.length > 0;
  const chosen = series || (listed ? defaultImage(offered) : 'noble');
  return (
    <ConfirmDialog
      change="installOperatingSystem"
      title={`Install an operating system on ${row.name}`}
      machine={row.name}
      confirmLabel="Install and enrol"
      consequence={
        <p>
          MAAS deploys the image below on <strong>{m.hostname}</strong> (system id <code>{m.systemId}</code>; a Ready machine is allocated first). Incus
          of the cluster chosen below issues a join token that goes only into the deploy's cloud-init user data, which runs enrol-member.sh: the server joins the cluster held, as{' '}
          <strong>{row.name}</strong>. The user data is never shown or kept.
        </p>
      }
      wide
      showFacts
      blocked={chooser.res.fetching && !chooser.res.data ? 'Reading the registered clusters.' : undefined}
      fieldNames={['series', 'cluster', ...config.fieldNames]}
      fields={(errors) => (
        <>
          {images.fetching && !images.data ? (
            <Loading what="the images MAAS holds" />
          ) : listed ? (
            <Field label="Image" error={errors.get('series')} hint={<>The OS images MAAS holds (its boot resources) for this machine's architecture, {m.architecture ?? 'unknown'}. An image still downloading fails the deploy with MAAS's error.</>}>
              {(a) => (
                <select {...a} className="input" value={chosen} onChange={(e) => setSeries(e.target.value)} name="series">
                  {offered.map((im) => (
                    <option key={im.name} value={im.name}>
                      {im.name} ({im.architectures.join(', ')})
                    </option>
                  ))}
                </select>
              )}
            </Field>
          ) : (
            <Field
              label="Series"
              error={errors.get('series')}
              hint={
                images.error
                  ? `MAAS's image list could not be read (${problemsOf(images.error)[0]?.message ?? 'no answer'}): type the series, for example noble or ubuntu/noble. Its image must already be synced in MAAS.`
                  : 'MAAS lists no OS image for this architecture: type the series, for example noble or ubuntu/noble. Its image must already be synced in MAAS.'
              }
            >
              {(a) => <input {...a} className="input" value={chosen} onChange={(e) => setSeries(e.target.value)} spellCheck={false} autoComplete="off" name="series" />}
            </Field>
          )}
          <ClusterChooser chooser={chooser} error={errors.get('cluster')} onChange={setPicked} />
          <MemberConfigRows state={config} errors={errors} />
        </>
      )}
      planKey={JSON.stringify({ name: row.name, series: chosen.trim(), cluster: chooser.cluster, memberConfig: config.input() })}
      run={(dryRun, planHash) => install({ input: { name: row.name, series: chosen.trim(), cluster: chooser.cluster, memberConfig: config.input(), dryRun, planHash } })}
      onClose={onClose}
    />
  );
}
