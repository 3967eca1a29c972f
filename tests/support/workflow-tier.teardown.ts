import { teardown } from './workflow-tier.setup';

export default teardown;
