/**
 * A GGUF model loaded with node-llama-cpp on the CPU, and one generation at a time on it.
 *
 * node-llama-cpp is an ES module outside the repository's node_modules (see deploy/local/model-real.sh),
 * so it is loaded by absolute path with a real `import()`: TypeScript keeps `import()` as it is in the
 * CommonJS it emits under `module: node16`, and Node loads ES modules from CommonJS that way.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ChatHistoryItem, ChatWrapper, Llama, LlamaContext, LlamaModel, LlamaModule, StopReason } from './llama-api';

export interface LlamaModelOptions {
  /** The node-llama-cpp package directory. */
  llamaDir: string;
  modelPath: string;
  /** Tokens the context holds: prompt and answer together. */
  contextSize: number;
  threads: number;
}

/** A conversation made ready for the model: its chat history and the prompt's length in tokens. */
export interface Prompt {
  history: ChatHistoryItem[];
  tokens: number;
}

export interface GenerateOptions {
  maxTokens: number;
  temperature: number;
  topP?: number;
  seed?: number;
  stop: string[];
  /** Each piece of text as it is written (streaming). */
  onText?: (text: string) => void;
  /** Aborting stops the generation; what was written so far is returned. */
  signal?: AbortSignal;
}

export interface Generation {
  text: string;
  stopReason: StopReason;
  /** Tokens the model wrote for `text` (the end-of-turn token and a matched stop sequence not included). */
  completionTokens: number;
}

export interface LoadedModel {
  /** The chat template's source: the GGUF's own, through node-llama-cpp's Jinja template wrapper. */
  readonly chatWrapper: string;
  readonly contextSize: number;
  /** The chat history and token count of a conversation, by the model's tokenizer and chat template. */
  prompt(history: ChatHistoryItem[]): Prompt;
  /** One generation on a context sequence of its own, disposed afterwards: nothing carries over to the next. */
  generate(prompt: Prompt, options: GenerateOptions): Promise<Generation>;
  dispose(): Promise<void>;
}

export class LlamaLoadError extends Error {
  override readonly name = 'LlamaLoadError';
}

export async function loadLlamaModel(options: LlamaModelOptions): Promise<LoadedModel> {
  const llamaCpp = await importLlama(options.llamaDir);
  let llama: Llama | undefined;
  let model: LlamaModel | undefined;
  try {
    llama = await llamaCpp.getLlama({ gpu: false, build: 'never', logLevel: 'error', progressLogs: false, maxThreads: options.threads });
    model = await llama.loadModel({ modelPath: options.modelPath });
    const context = await model.createContext({ contextSize: options.contextSize, sequences: 1, threads: options.threads });
    // The GGUF's own template, not a look-alike: node-llama-cpp's ChatML wrapper, which "auto" picks for
    // this model, puts a BOS token before the first <|im_start|>, and SmolLM2's BOS *is* <|im_start|>.
    const wrapper = llamaCpp.resolveChatWrapper(model, { type: 'jinjaTemplate', fallbackToOtherWrappersOnJinjaError: false });
    return loaded(llamaCpp, llama, model, context, wrapper);
  } catch (err) {
    await model?.dispose().catch(() => undefined);
    await llama?.dispose().catch(() => undefined);
    throw new LlamaLoadError(`could not load ${options.modelPath}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

async function importLlama(dir: string): Promise<LlamaModule> {
  let entry: string;
  try {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { main?: string; version?: string };
    entry = join(dir, pkg.main ?? 'dist/index.js');
  } catch (err) {
    throw new LlamaLoadError(`node-llama-cpp is not installed at ${dir} (run: bash deploy/local/model-real.sh install): ${(err as Error).message}`);
  }
  const module = (await import(pathToFileURL(entry).href)) as Partial<LlamaModule>;
  if (typeof module.getLlama !== 'function' || typeof module.LlamaChat !== 'function' || typeof module.resolveChatWrapper !== 'function') {
    throw new LlamaLoadError(`${entry} does not export getLlama, LlamaChat and resolveChatWrapper: not the node-llama-cpp this server is written for`);
  }
  return module as LlamaModule;
}

function loaded(llamaCpp: LlamaModule, llama: Llama, model: LlamaModel, context: LlamaContext, wrapper: ChatWrapper): LoadedModel {
  return {
    chatWrapper: wrapper.wrapperName,
    contextSize: context.contextSize,

    prompt(history) {
      return { history, tokens: wrapper.generateContextState({ chatHistory: history }).contextText.tokenize(model.tokenizer).length };
    },

    async generate(prompt, options) {
      // Checkpoints let a long-lived chat rewind cheaply; a sequence that lives for one request never
      // rewinds, and taking them made generation about 20 times slower here.
      const sequence = context.getSequence({ checkpoints: { max: 0, interval: false } });
      const chat = new llamaCpp.LlamaChat({ contextSequence: sequence, chatWrapper: wrapper });
      let completionTokens = 0;
      try {
        const result = await chat.generateResponse(prompt.history, {
          maxTokens: options.maxTokens,
          temperature: options.temperature,
          ...(options.topP !== undefined ? { topP: options.topP } : {}),
          ...(options.seed !== undefined ? { seed: options.seed } : {}),
          ...(options.stop.length ? { customStopTriggers: options.stop } : {}),
          onToken: (tokens) => {
            completionTokens += tokens.length;
          },
          ...(options.onText ? { onTextChunk: options.onText } : {}),
          ...(options.signal ? { signal: options.signal } : {}),
          stopOnAbortSignal: true,
        });
        return { text: result.response, stopReason: result.metadata.stopReason, completionTokens };
      } finally {
        chat.dispose();
        await sequence.dispose();
      }
    },

    async dispose() {
      await context.dispose();
      await model.dispose();
      await llama.dispose();
    },
  };
}
