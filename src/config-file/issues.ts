/**
 * What the second pass over a provider's config file reports: a problem at a path into the
 * document (the loader turns the path into a line). Every resolve function takes a ReportIssue.
 */

/** Keys and indexes from the document's root, e.g. ['loadBalancer', 'pools', 2, 'addresses']. */
export type ConfigPath = (string | number)[];

export interface ConfigIssue {
  path: ConfigPath;
  message: string;
}

export type ReportIssue = (path: ConfigPath, message: string) => void;
