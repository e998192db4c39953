// What the server tells the page about itself (data attributes of #console).
export interface ConsoleConfig {
  endpoint: string;
  session: string;
  // sso is where to ask for the identity provider's sign-in URL; '' when SSO is off.
  sso: string;
  title: string;
  // requestTimeoutMs is the server's bound on each wait for Incus or MAAS
  // (APELORA_REQUEST_TIMEOUT): after it the server answers, with what it could read.
  requestTimeoutMs: number;
}

export function readConfig(root: HTMLElement): ConsoleConfig {
  return {
    endpoint: root.dataset.endpoint || '/graphql',
    session: root.dataset.session || '/api/v1/session',
    sso: root.dataset.sso || '',
    title: root.dataset.title || 'Fabric Console',
    requestTimeoutMs: positive(Number(root.dataset.requestTimeout)) ?? 10000,
  };
}

function positive(n: number): number | undefined {
  return Number.isFinite(n) && n > 0 ? n : undefined;
}
