// Package configtest holds the table test every config's Validate gets in
// this module: Validate checks the config as the constructor uses it, its
// defaults applied to the zero fields, and leaves the caller's config as it
// is; an invalid config is rejected with the package's sentinel error and a
// message that names the field and its allowed range, and the constructor
// rejects it the same way.
//
// [Run] takes the cases ([Case]: a name, a config and the text its error
// must hold, "" for a valid config) and checks each in its own subtest.
// [Options] adapt it to a package: how to take a snapshot of a config that
// holds slices, maps or funcs, how to match the error text, and which
// constructor to try. [With] writes a case as a change to a minimal config.
package configtest
