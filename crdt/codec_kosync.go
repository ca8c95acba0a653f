package crdt

// The wire form of the kosync records: maps with small integer keys like the
// book and device records, the register a fixed array like a position.

type wireKosyncUser struct {
	Name string    `cbor:"0,keyasint"`
	Auth *wireText `cbor:"1,keyasint,omitempty"` // absent in a record that only names the account
}

type wireKosyncProgress struct {
	User     string              `cbor:"0,keyasint"`
	Document string              `cbor:"1,keyasint"`
	Position *wireKosyncPosition `cbor:"2,keyasint,omitempty"` // absent in a record that only names its key
}

type wireKosyncPosition struct {
	_          struct{} `cbor:",toarray"`
	Wall       uint64
	Logical    uint32
	Device     uint64
	Progress   string
	Percentage float64 // deterministic CBOR writes the shortest exact float
	Reader     string
	ReaderID   string
}

// records counts the records an entry holds; a valid one holds exactly one.
func (w *wireEntry) records() int {
	n := 0
	for _, present := range []bool{w.Book != nil, w.Device != nil, w.KosyncUser != nil, w.KosyncProgress != nil, w.KosyncLink != nil, w.Member != nil} {
		if present {
			n++
		}
	}
	return n
}

func (u *KosyncUser) wire() *wireKosyncUser {
	return &wireKosyncUser{Name: u.Name, Auth: textWire(u.Auth)}
}

func (w *wireKosyncUser) domain() KosyncUser {
	return KosyncUser{Name: w.Name, Auth: w.Auth.domain()}
}

func (p *KosyncProgress) wire() *wireKosyncProgress {
	w := &wireKosyncProgress{User: p.User, Document: p.Document}
	if !p.At.IsZero() {
		w.Position = &wireKosyncPosition{
			Wall: p.At.Wall, Logical: p.At.Logical, Device: uint64(p.At.Device),
			Progress: p.Progress, Percentage: p.Percentage, Reader: p.Device, ReaderID: p.DeviceID,
		}
	}
	return w
}

func (w *wireKosyncProgress) domain() KosyncProgress {
	p := KosyncProgress{User: w.User, Document: w.Document}
	if w.Position != nil {
		p.At = Timestamp{Wall: w.Position.Wall, Logical: w.Position.Logical, Device: DeviceID(w.Position.Device)}
		p.Progress, p.Percentage = w.Position.Progress, w.Position.Percentage
		p.Device, p.DeviceID = w.Position.Reader, w.Position.ReaderID
	}
	return p
}

type wireKosyncLink struct {
	Document string          `cbor:"0,keyasint"`
	Link     *wireKosyncBook `cbor:"1,keyasint,omitempty"` // absent in a record that only names its document
}

type wireKosyncBook struct {
	_       struct{} `cbor:",toarray"`
	Wall    uint64
	Logical uint32
	Device  uint64
	Book    []byte // the binary book key
	Title   string
}

func (l *KosyncLink) wire() *wireKosyncLink {
	w := &wireKosyncLink{Document: l.Document}
	if !l.At.IsZero() {
		key, _ := l.Book.AppendBinary(nil) // validated: not zero
		w.Link = &wireKosyncBook{Wall: l.At.Wall, Logical: l.At.Logical, Device: uint64(l.At.Device), Book: key, Title: l.Title}
	}
	return w
}

func (w *wireKosyncLink) domain() (KosyncLink, error) {
	l := KosyncLink{Document: w.Document}
	if w.Link != nil {
		key, err := BookKeyFromBinary(w.Link.Book)
		if err != nil {
			return KosyncLink{}, err
		}
		l.At = Timestamp{Wall: w.Link.Wall, Logical: w.Link.Logical, Device: DeviceID(w.Link.Device)}
		l.Book, l.Title = key, w.Link.Title
	}
	return l, nil
}
