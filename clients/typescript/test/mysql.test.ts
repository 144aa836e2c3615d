// PULL-C contract cases on MySQL/MariaDB (test/dialect-cases.ts).
import { registerCases } from './dialect-cases.js';

registerCases('mysql');
