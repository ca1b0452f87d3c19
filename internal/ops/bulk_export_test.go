package ops

import "time"

// SetBulkNow replaces b's clock (expiry tests).
func SetBulkNow(b *Bulks, now func() time.Time) { b.now = now }
