/**
 * The part of node-llama-cpp (3.21.x) this server uses, typed here because the package is not a dependency
 * of the repository: it is fetched on first use into .stack/opt/llama (deploy/local/model-real.sh) and
 * loaded by path at run time. Names and shapes follow the package's own declarations; only what is called
 * is listed.
 */

export interface LlamaModule {
  getLlama(options: {
    gpu: false;
    /** `never`: use the prebuilt binary or fail; never try to download sources or build llama.cpp. */
    build: 'never';
    logLevel: 'disabled' | 'fatal' | 'error' | 'warn' | 'info' | 'log' | 'debug';
    progressLogs: false;
    maxThreads?: number;
  }): Promise<Llama>;
  LlamaChat: new (options: { contextSequence: LlamaContextSequence; chatWrapper: ChatWrapper }) => LlamaChat;
  resolveChatWrapper(model: LlamaModel, options: { type: 'jinjaTemplate'; fallbackToOtherWrappersOnJinjaError: false }): ChatWrapper;
}

export interface Llama {
  loadModel(options: { modelPath: string }): Promise<LlamaModel>;
  dispose(): Promise<void>;
}

export type Token = number & { __token: never };

export interface Tokenizer {
  (text: string, specialTokens?: boolean): Token[];
}

export interface LlamaModel {
  readonly tokenizer: Tokenizer;
  readonly trainContextSize: number;
  createContext(options: { contextSize: number; sequences: 1; threads: number }): Promise<LlamaContext>;
  dispose(): Promise<void>;
}

export interface LlamaContext {
  readonly contextSize: number;
  getSequence(options: { checkpoints: { max: number; interval: false } }): LlamaContextSequence;
  dispose(): Promise<void>;
}

export interface LlamaContextSequence {
  readonly contextTokens: Token[];
  dispose(): Promise<void>;
}

/** A chat history item as node-llama-cpp takes it (`model` is the assistant). */
export type ChatHistoryItem = { type: 'system'; text: string } | { type: 'user'; text: string } | { type: 'model'; response: string[] };

export interface LlamaText {
  tokenize(tokenizer: Tokenizer): Token[];
}

export interface ChatWrapper {
  readonly wrapperName: string;
  generateContextState(options: { chatHistory: ChatHistoryItem[] }): { contextText: LlamaText };
}

export type StopReason = 'eogToken' | 'stopGenerationTrigger' | 'functionCalls' | 'maxTokens' | 'abort' | 'customStopTrigger';

export interface LlamaChat {
  generateResponse(
    history: ChatHistoryItem[],
    options: {
      maxTokens: number;
      temperature: number;
      topP?: number;
      seed?: number;
      customStopTriggers?: string[];
      onToken?: (tokens: Token[]) => void;
      onTextChunk?: (text: string) => void;
      signal?: AbortSignal;
      stopOnAbortSignal: true;
    },
  ): Promise<{ response: string; metadata: { stopReason: StopReason } }>;
  dispose(): void;
}
