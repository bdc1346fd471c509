// Package x12 reads ASC X12 interchanges just far enough to check their
// envelopes and give each copy new control numbers: the test payloads of the
// edi-as2 example.
//
// An interchange is an ISA header, functional groups (GS ... GE) each holding
// transaction sets (ST ... SE), and an IEA trailer. The ISA segment has a
// fixed width of 106 characters and defines the delimiters: the element
// separator is its 4th character, the sub-element separator is ISA16, the
// segment terminator is the character after ISA16, and from version 00402 on
// ISA11 is the repetition separator. Line breaks after segment terminators
// are allowed and kept.
//
// [Parse] checks the syntax and the nesting of the envelopes; [Interchange.Validate]
// checks the counts and control numbers (ISA13 = IEA02, GS06 = GE02,
// ST02 = SE02, IEA01, GE01 and SE01 counts) and, in a purchase order, the
// CTT line count and hash total; [Interchange.Renumber] writes a copy with new
// control numbers that still validates.
package x12
