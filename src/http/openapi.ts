import { z } from 'zod';
import type { Operation } from './route.js';

const PATH_PARAM = /:([A-Za-z_][A-Za-z0-9_]*)/g;

/** `/projects/:id` → `/projects/{id}` (and optional `{.:format}` groups → `.{format}`). */
export function openApiPath(koaPath: string): string {
  return koaPath.replace(/\{([^}]*)\}/g, '$1').replace(PATH_PARAM, '{$1}');
}

type JsonSchema = Record<string, unknown> & { properties?: Record<string, JsonSchema>; required?: string[] };

function inputSchema(schema: z.ZodType | undefined): JsonSchema {
  if (!schema) return { type: 'object', properties: {} };
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  delete json.$schema;
  return json;
}

/** Builds the OpenAPI 3.1 document for every declared route. */
export function buildOpenApi(operations: readonly Operation[], info: { version: string; baseUrl: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of operations) {
    const path = openApiPath(op.path);
    const pathParams = [...op.path.matchAll(PATH_PARAM)].map((m) => m[1] as string);
    const schema = inputSchema(op.params);
    const properties = schema.properties ?? {};
    const required = new Set(schema.required ?? []);
    const parameters: unknown[] = pathParams.map((name) => ({
      name,
      in: 'path',
      required: true,
      schema: properties[name] ?? { type: 'string' },
    }));
    const bodyOrQuery = Object.entries(properties).filter(([name]) => !pathParams.includes(name));
    const operation: Record<string, unknown> = {
      summary: op.summary,
      operationId: `${op.method}${path.replace(/[^A-Za-z0-9]+/g, '_')}`,
      tags: op.tags,
      responses: { default: { description: 'GitLab-compatible response' } },
    };
    if (op.auth === 'required') operation.security = [{ privateToken: [] }, { bearer: [] }];
    if (op.method === 'get' || op.method === 'delete') {
      for (const [name, s] of bodyOrQuery)
        parameters.push({ name, in: 'query', required: required.has(name), schema: s });
    } else if (bodyOrQuery.length > 0) {
      operation.requestBody = {
        content: {
          'application/json': {
            schema: {
              type: 'object',
              properties: Object.fromEntries(bodyOrQuery),
              required: bodyOrQuery.map(([n]) => n).filter((n) => required.has(n)),
            },
          },
        },
      };
    }
    operation.parameters = parameters;
    paths[path] = { ...paths[path], [op.method]: operation };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Depot API (GitLab REST API v4)', version: info.version },
    servers: [{ url: `${info.baseUrl}/api/v4` }],
    components: {
      securitySchemes: {
        privateToken: { type: 'apiKey', in: 'header', name: 'PRIVATE-TOKEN' },
        bearer: { type: 'http', scheme: 'bearer' },
      },
    },
    paths,
  };
}
