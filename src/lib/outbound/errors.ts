/** Why an outbound request did not happen or did not finish. Each kind is its own class. */
export class OutboundError extends Error {
  override name = 'OutboundError';
}

/** The URL, or an address it resolves to, may not be reached (GitLab's BlockedUrlError). */
export class OutboundBlockedError extends OutboundError {
  override name = 'OutboundBlockedError';
}

/** Connecting, or the whole exchange with its redirects, took longer than allowed. */
export class OutboundTimeoutError extends OutboundError {
  override name = 'OutboundTimeoutError';
  constructor(
    readonly phase: 'connect' | 'total',
    readonly limitMs: number,
  ) {
    super(phase === 'connect' ? `Connection timed out after ${limitMs} ms` : `Request timed out after ${limitMs} ms`);
  }
}

/** The response body grew past the byte limit; the request was aborted there. */
export class OutboundTooLargeError extends OutboundError {
  override name = 'OutboundTooLargeError';
  constructor(readonly limitBytes: number) {
    super(`Response body is larger than ${limitBytes} bytes`);
  }
}

/** More redirects than allowed (HTTParty's RedirectionTooDeep). */
export class OutboundRedirectLimitError extends OutboundError {
  override name = 'OutboundRedirectLimitError';
  constructor(readonly limit: number) {
    super(`Too many redirects (more than ${limit})`);
  }
}

/** The connection failed or broke (refused, reset, TLS failure, malformed response). */
export class OutboundConnectionError extends OutboundError {
  override name = 'OutboundConnectionError';
}
