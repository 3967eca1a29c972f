import { useState } from 'preact/hooks';
import { errorText, signInWithOrg, signInWithToken } from './api';

/**
 * Two ways in: an API token, traded for the HttpOnly session cookie (any mode); or, in local mode
 * only, an org name sent as X-Org. The gateway decides which it accepts and says why not.
 */
export function SignIn({ message }: { message?: string }) {
  const [token, setToken] = useState('');
  const [org, setOrg] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();

  const attempt = async (work: () => Promise<void>) => {
    setBusy(true);
    setError(undefined);
    try {
      await work();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in to AgentRun</h1>
      {message && (
        <p class="notice" role="status">
          {message}
        </p>
      )}
      <div role="alert" class="outcome" data-testid="sign-in-error">
        {error && <p class="error">{error}</p>}
      </div>
      <div class="sign-in-options">
        <form
          class="panel"
          onSubmit={(e) => {
            e.preventDefault();
            void attempt(() => signInWithToken(token.trim()));
          }}
        >
          <h2>With an API token</h2>
          <label for="token">API token</label>
          <input id="token" name="token" type="password" autocomplete="off" required value={token} onInput={(e) => setToken(e.currentTarget.value)} />
          <p class="hint">
            Create one with <code>npm run token -- create --org ORG --subject WHO</code> (the subject is who approves evals). The page sends it once, for a session cookie it cannot read.
          </p>
          <button type="submit" disabled={busy}>
            Sign in
          </button>
        </form>
        <form
          class="panel"
          onSubmit={(e) => {
            e.preventDefault();
            void attempt(() => signInWithOrg(org.trim()));
          }}
        >
          <h2>Local mode: by org</h2>
          <label for="org">Org</label>
          <input id="org" name="org" autocomplete="organization" required pattern="[A-Za-z0-9][A-Za-z0-9._\-]{0,63}" value={org} onInput={(e) => setOrg(e.currentTarget.value)} />
          <p class="hint">
            Sent as <code>X-Org</code> with no authentication; a gateway in production mode refuses it.
          </p>
          <button type="submit" disabled={busy}>
            Use this org
          </button>
        </form>
      </div>
    </section>
  );
}
