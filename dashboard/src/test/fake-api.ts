/**
 * The api as a page test answers it: openapi-fetch takes `fetch` when the
 * client module loads, so setup.ts installs a delegate before any test file
 * imports it, and each test sets `fakeApi.handle`. Node's Request, unlike a
 * browser's, does not resolve the client's relative URLs against the page.
 */
export const fakeApi: { handle: (request: Request) => Promise<Response> } = { handle: () => Promise.reject(new Error('no fake api')) };

export function installFakeApi(): void {
  const NodeRequest = globalThis.Request;
  globalThis.Request = class extends NodeRequest {
    constructor(input: RequestInfo | URL, init?: RequestInit) {
      super(typeof input === 'string' ? new URL(input, location.href) : input, init);
    }
  };
  globalThis.fetch = (input: RequestInfo | URL, init?: RequestInit) => fakeApi.handle(new Request(input, init));
}
