import { Type, type Static } from '@sinclair/typebox';

/**
 * An agent is a definition: its instructions (the system prompt), the model it talks to, the tools it
 * is offered, how many steps it may take, and how it samples. A run records the exact definition it
 * runs, by name and version; the version is the sha256 of the definition's canonical JSON once
 * normalised (`normaliseAgentDefinition`), so the same definition is the same version however it was
 * written. Stored definitions are org-scoped and never change; a new body under a name is a new version.
 */

/** A definition's name: what `PUT /agent-definitions/{name}` stores it under. */
export const AGENT_NAME_PATTERN = '^[a-z0-9][a-z0-9._-]{0,62}$';
/** Names under this prefix are the platform's own definitions (`builtin.scripted`, `builtin.llm`): never stored by an org. */
export const BUILTIN_AGENT_PREFIX = 'builtin.';
/** A definition's body, as JSON, is at most this many bytes (a larger one is a 413). */
export const MAX_AGENT_DEFINITION_BYTES = 64 * 1024;
/** Instructions are bounded in characters (code points), as goals are. */
export const MAX_INSTRUCTIONS_CHARS = 32_000;
/** A tool's name in a definition: lowercase, as the catalogue's are. */
export const AGENT_TOOL_NAME_PATTERN = '^[a-z][a-z0-9_]{0,62}$';
const MODEL_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$';
const ENDPOINT_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';

/** A tool a definition offers: its name, or an object naming it with the tool's options (`{"name": "exec", "timeout_s": 60}`). */
export const AGENT_TOOL_REF_SCHEMA = Type.Union([
  Type.String({ pattern: AGENT_TOOL_NAME_PATTERN }),
  Type.Object({ name: Type.String({ pattern: AGENT_TOOL_NAME_PATTERN }) }, { additionalProperties: true }),
]);

export const AGENT_DEFINITION_SCHEMA = Type.Object(
  {
    /** The system prompt every conversation of the agent starts with. */
    instructions: Type.String({ maxLength: MAX_INSTRUCTIONS_CHARS }),
    /** The model its calls ask for. */
    model: Type.String({ pattern: MODEL_PATTERN }),
    /** A model endpoint the workers are configured with (`AGENTRUN_MODEL_ENDPOINTS`); absent: `default`. */
    model_endpoint: Type.Optional(Type.String({ pattern: ENDPOINT_PATTERN })),
    /** The tools the model is offered, in the order they are offered; each at most once. */
    tools: Type.Array(AGENT_TOOL_REF_SCHEMA, { maxItems: 64 }),
    max_steps: Type.Integer({ minimum: 1, maximum: 10_000 }),
    /** Sampling temperature; absent: the model's own default. */
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2 })),
    /** The most tokens one reply may take; absent: the workers' `AGENTRUN_MODEL_MAX_TOKENS`. */
    max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  },
  { additionalProperties: false },
);
export type AgentDefinition = Static<typeof AGENT_DEFINITION_SCHEMA>;

/** A tool as a normalised definition names it: always an object, its options in it. */
export interface AgentToolRef {
  name: string;
  [option: string]: unknown;
}

/** A definition as it is versioned, stored and run: every default filled in, every tool an object. */
export interface NormalisedAgentDefinition {
  instructions: string;
  model: string;
  model_endpoint: string;
  tools: AgentToolRef[];
  max_steps: number;
  temperature?: number;
  max_tokens?: number;
}

/** What a run records of the definition it runs. */
export interface AgentRef {
  name: string;
  version: string;
}

/**
 * Fills a definition's defaults (`model_endpoint`: `default`) and writes each tool as an object, so
 * two ways of writing one definition normalise to one value. `temperature` and `max_tokens` stay absent
 * when absent: "the model's default" is not a number this side knows.
 */
export function normaliseAgentDefinition(definition: AgentDefinition): NormalisedAgentDefinition {
  return {
    instructions: definition.instructions,
    model: definition.model,
    model_endpoint: definition.model_endpoint ?? 'default',
    tools: definition.tools.map((tool) => (typeof tool === 'string' ? { name: tool } : { ...tool })),
    max_steps: definition.max_steps,
    ...(definition.temperature !== undefined ? { temperature: definition.temperature } : {}),
    ...(definition.max_tokens !== undefined ? { max_tokens: definition.max_tokens } : {}),
  };
}

/**
 * What is wrong with a definition the schema accepted, given the tools there are: an unknown tool (the
 * message lists the tools there are), a tool offered twice, instructions over the limit in code points.
 * Undefined when nothing is.
 */
export function agentDefinitionProblem(definition: NormalisedAgentDefinition, knownTools: readonly string[]): string | undefined {
  const unknown = definition.tools.map((t) => t.name).filter((name) => !knownTools.includes(name));
  if (unknown.length) return `unknown tool${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => `'${n}'`).join(', ')}; the tools there are: ${knownTools.join(', ')}`;
  const seen = new Set<string>();
  for (const { name } of definition.tools) {
    if (seen.has(name)) return `tool '${name}' is offered twice`;
    seen.add(name);
  }
  const chars = [...definition.instructions].length;
  if (chars > MAX_INSTRUCTIONS_CHARS) return `instructions must be at most ${MAX_INSTRUCTIONS_CHARS} characters (got ${chars})`;
  return undefined;
}

/** Whether a name is the platform's own (`builtin.*`): such names are run, never stored by an org. */
export function isBuiltinAgentName(name: string): boolean {
  return name.startsWith(BUILTIN_AGENT_PREFIX);
}
