import './app.css';
import { render } from 'preact';
import { useEffect } from 'preact/hooks';
import { checkSession, signOut } from './api';
import { DatasetsPage } from './datasets-page';
import { datasetsHref, location, routeOf, runsHref } from './router';
import { RunPage } from './run-page';
import { RunsPage } from './runs-page';
import { session, storedOrg } from './session';
import { SignIn } from './sign-in';
import { Link } from './ui';

function Header() {
  const current = session.value;
  return (
    <header class="top">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Link href={runsHref} class="brand">
        AgentRun
      </Link>
      <nav aria-label="Main">
        <Link href={runsHref}>Runs</Link>
        <Link href={datasetsHref}>Datasets</Link>
      </nav>
      <div class="who">
        {current.kind === 'org' && <span data-testid="who">{`Org ${current.org} (local mode, X-Org)`}</span>}
        {current.kind === 'token' && (
          <span data-testid="who">
            {current.subject ? `Signed in as ${current.subject}${current.org ? ` (org ${current.org})` : ''}` : `Signed in with an API token${current.org ? ` (org ${current.org})` : ''}`}
          </span>
        )}
        {(current.kind === 'org' || current.kind === 'token') && (
          <button type="button" class="secondary" onClick={() => void signOut()}>
            Sign out
          </button>
        )}
      </div>
    </header>
  );
}

function Page() {
  const current = session.value;
  const route = routeOf(location.value.path);
  useEffect(() => {
    document.title = route.page === 'run' ? `${route.runId} · AgentRun` : route.page === 'datasets' ? 'Datasets · AgentRun' : 'Runs · AgentRun';
  }, [route.page, route.page === 'run' ? route.runId : '']);

  if (current.kind === 'checking') return <p aria-busy="true">Loading…</p>;
  if (current.kind === 'signed-out') return <SignIn message={current.message} />;
  if (route.page === 'runs') return <RunsPage />;
  if (route.page === 'run') return <RunPage key={route.runId} runId={route.runId} />;
  if (route.page === 'datasets') return <DatasetsPage />;
  return (
    <section>
      <h1>Page not found</h1>
      <p>
        <Link href={runsHref}>Go to the runs</Link>
      </p>
    </section>
  );
}

function App() {
  return (
    <>
      <Header />
      <main id="main" tabIndex={-1}>
        <Page />
      </main>
    </>
  );
}

void checkSession(storedOrg());
render(<App />, document.getElementById('app') as HTMLElement);
