// What the server tells the page about itself (data attributes of #console).
export interface ConsoleConfig {
  endpoint: string;
  session: string;
  // sso is where to ask for the identity provider's sign-in URL; '' when SSO is off.
  sso: string;
  title: string;
}

export function readConfig(root: HTMLElement): ConsoleConfig {
  return {
    endpoint: root.dataset.endpoint || '/graphql',
    session: root.dataset.session || '/api/v1/session',
    sso: root.dataset.sso || '',
    title: root.dataset.title || 'Fabric Console',
  };
}
