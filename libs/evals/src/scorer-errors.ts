/** Options a scorer refuses (a bad pattern, a target that is not a number): the eval's input is wrong, not the case. */
export class ScorerOptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScorerOptionError';
  }
}
