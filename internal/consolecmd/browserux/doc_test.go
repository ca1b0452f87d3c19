// Package browserux checks the console's pages in real Chromium for
// people under pressure: filters, live refresh, refusals, phone layouts and
// the task walk-throughs timed by their clicks (scripts/playwright-setup.sh
// prepares the browser).
package browserux
