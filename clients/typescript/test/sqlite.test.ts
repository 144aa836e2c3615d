// PULL-C contract cases on SQLite (test/dialect-cases.ts).
import { registerCases } from './dialect-cases.js';

registerCases('sqlite');
