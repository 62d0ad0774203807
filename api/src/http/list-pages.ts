import { LRUCache } from 'lru-cache';

interface Page {
  version: number;
  /** The response body, as sent. */
  json: string;
}

/**
 * Rendered pages of workflow lists, each labelled with its user's list
 * version when it was read (`ActiveSession.workflowListVersion`, moved by
 * triggers in the transaction of any change the list shows). A page is sent again only
 * while the version read for the request is still its label; the version is
 * read from the store on every request, so a change made through any replica
 * or role shows at once. Bounded by the bytes it holds, least recently used
 * pages leave first; a budget of 0 turns it off.
 */
export class ListPageCache {
  private readonly pages: LRUCache<string, Page> | undefined;

  constructor(maxBytes: number) {
    this.pages =
      maxBytes > 0
        ? new LRUCache<string, Page>({ maxSize: maxBytes, sizeCalculation: (page, key) => 2 * (page.json.length + key.length) + 64 })
        : undefined;
  }

  /** The page stored under `key` if it was read at `version`. */
  get(key: string, version: number): string | undefined {
    const page = this.pages?.get(key);
    return page?.version === version ? page.json : undefined;
  }

  set(key: string, version: number, json: string): void {
    this.pages?.set(key, { version, json });
  }
}
