// logging: filled in by the observability change.
export {};
