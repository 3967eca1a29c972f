// Each test runs a few seconds of real server time; a minute means something is stuck.
jest.setTimeout(60_000);
