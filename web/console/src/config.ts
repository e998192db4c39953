// What the server tells the page about itself (data attributes of #console).
export interface ConsoleConfig {
  endpoint: string;
  session: string;
  title: string;
}

export function readConfig(root: HTMLElement): ConsoleConfig {
  return {
    endpoint: root.dataset.endpoint || '/graphql',
    session: root.dataset.session || '/api/v1/session',
    title: root.dataset.title || 'Fabric Console',
  };
}
