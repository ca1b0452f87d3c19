// Package browserux checks the console's pages in real Chromium for
// people under pressure: every page on a phone and a desktop, in both
// themes, through axe-core and for overflow, and the task walk-throughs
// timed by their clicks (scripts/playwright-setup.sh prepares the browser).
package browserux
