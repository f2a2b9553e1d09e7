/**
 * Typed API errors with GitLab's exact bodies (docs/gitlab-behaviour.md §1). Services throw
 * these; one middleware turns them into responses.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof body.message === 'string' ? body.message : JSON.stringify(body));
  }
}

/**
 * GitLab's MovedPermanentlyError: 301 with `Location`, and for a body the sentence naming it as
 * plain text (Grape's `rack_response`), not JSON.
 */
export class MovedPermanently extends ApiError {
  constructor(location: string) {
    super(301, { message: `This resource has been moved permanently to ${location}` }, { Location: location });
  }
}

/** `404 <What> Not Found`; bare `404 Not Found` without a subject. */
export const notFound = (what?: string) =>
  new ApiError(404, { message: what ? `404 ${what} Not Found` : '404 Not Found' });

/** A record lookup that failed the way Rails' `find` fails: note the lower-case "found". */
export const recordNotFound = () => new ApiError(404, { message: '404 Not found' });

export const forbidden = (reason?: string) =>
  new ApiError(403, { message: reason ? `403 Forbidden - ${reason}` : '403 Forbidden' });

export const badRequest = (reason?: string) =>
  new ApiError(400, { message: reason ? `400 Bad request - ${reason}` : '400 Bad request' });

/** A 400 whose message is given whole, as GitLab's `render_api_error!(msg, 400)` does. */
export const badRequestMessage = (message: string) => new ApiError(400, { message });

export const unauthorized = (reason?: string) =>
  new ApiError(401, { message: reason ? `401 Unauthorized - ${reason}` : '401 Unauthorized' });

export const conflict = (message = '409 Conflict') => new ApiError(409, { message });

export const unprocessable = (message = '422 Unprocessable Entity') => new ApiError(422, { message });

export const preconditionFailed = () => new ApiError(412, { message: '412 Precondition Failed' });

/** Model validation failure: `{"message": {"field": ["msg", ...]}}`. */
export const validationError = (errors: Record<string, string[]>, status = 400) =>
  new ApiError(status, { message: errors });

/** Parameter validation failure (Grape's shape): `{"error": "a is missing, b is invalid"}`. */
export const paramError = (messages: string[]) => new ApiError(400, { error: messages.join(', ') });

const BEARER_REALM = 'Bearer realm="The API"';

/** OAuth2 bearer-token errors from GitLab's API guard (RFC 6750 shape). */
export const invalidToken = (description: string) =>
  new ApiError(
    401,
    { error: 'invalid_token', error_description: description },
    { 'WWW-Authenticate': `${BEARER_REALM}, error="invalid_token", error_description="${description}"` },
  );

export const TOKEN_EXPIRED = 'Token is expired. You can either do re-authorization or token refresh.';
export const TOKEN_REVOKED = 'Token was revoked. You have to re-authorize from the user.';

export const insufficientScope = (scopes: string[]) =>
  new ApiError(403, {
    error: 'insufficient_scope',
    error_description: 'The request requires higher privileges than provided by the access token.',
    scope: scopes.join(' '),
  });

export const tooManyRequests = (message: string, retryAfterSeconds: number, headers: Record<string, string> = {}) =>
  new ApiError(429, { message: { error: message } }, { 'Retry-After': String(retryAfterSeconds), ...headers });

export const payloadTooLarge = () => new ApiError(413, { message: '413 Request Entity Too Large' });

export const unsupportedMediaType = () => new ApiError(415, { message: '415 Unsupported Media Type' });

/**
 * A repository storage that refuses writes (mounted read-only, or full). GitLab answers Gitaly's
 * resource exhaustion with 503 and a message; this is the same kind of fault: the server's, not
 * the request's, and over once an operator acts, so clients that retry 503 may retry.
 */
export const STORAGE_READ_ONLY_MESSAGE = 'The repository storage is read-only. Please try again later.';
export const STORAGE_FULL_MESSAGE = 'The repository storage is full. Please try again later.';
export const storageUnavailable = (fault: 'read_only' | 'full') =>
  new ApiError(503, { message: fault === 'read_only' ? STORAGE_READ_ONLY_MESSAGE : STORAGE_FULL_MESSAGE });

export const internalError = () => new ApiError(500, { message: '500 Internal Server Error' });
