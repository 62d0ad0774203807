// Placeholder: this role is not implemented yet (see README.md).
export {};
